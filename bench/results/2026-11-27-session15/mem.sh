#!/usr/bin/env bash
# mem.sh BIN NAME: 100,000 idle workers, registered-phase figures, then stop; CPU of the server sampled every 10 s
bin=$1; name=$2; out=/tmp/s15/mem/$name; mkdir -p $out
( VIGIL=$bin OUT=$out INTERVAL=120s LEASE=180s STEADY=1 SETTLE=30s setsid /work/main/bench/memory.sh 100000 > $out/run.log 2>&1 ) &
while ! grep -q "all deleted" $out/run.log 2>/dev/null; do
  pid=$(ss -ltnp 2>/dev/null | grep ":22233 " | grep -o "pid=[0-9]*" | head -1 | cut -d= -f2)
  if [ -n "$pid" ]; then echo "$(date +%s) $(awk '{print $14+$15}' /proc/$pid/stat 2>/dev/null) $(grep VmRSS /proc/$pid/status 2>/dev/null | awk '{print $2}')" >> $out/cpu.log; fi
  sleep 10
done
sleep 5
pkill -f "bench/memory.sh 100000"; pkill -f "port 22233"; sleep 3
pkill -9 -f "22233" ; echo done $name
