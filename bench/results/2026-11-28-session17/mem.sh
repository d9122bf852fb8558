#!/usr/bin/env bash
# mem.sh BIN NAME [SERVER_ARGS]: 100,000 idle workers (120 s interval, 180 s lease, STEADY=1); registered-phase figures, then stop
bin=$1; name=$2; out=/tmp/s17/mem/$name; mkdir -p $out
( VIGIL=$bin OUT=$out INTERVAL=120s LEASE=180s STEADY=1 SETTLE=30s SERVER_ARGS="${3:-}" setsid /work/main/bench/memory.sh 100000 > $out/run.log 2>&1 ) &
while ! grep -q "registered RSS" $out/run.log 2>/dev/null; do
  pid=$(ss -ltnp 2>/dev/null | grep ":22233 " | grep -o "pid=[0-9]*" | head -1 | cut -d= -f2)
  if [ -n "$pid" ]; then echo "$(date +%s) $(awk '{print $14+$15}' /proc/$pid/stat 2>/dev/null) $(grep VmRSS /proc/$pid/status 2>/dev/null | awk '{print $2}')" >> $out/cpu.log; fi
  sleep 10
done
sleep 2
pkill -f "bench/memory.sh 100000"; pkill -f "port 22233"; sleep 3
pkill -9 -f "22233" ; echo done $name
