#!/usr/bin/env bash
out=/tmp/s15/memprof
( VIGIL=/tmp/s15/vigil-new OUT=$out INTERVAL=120s LEASE=180s STEADY=1 SETTLE=30s setsid /work/main/bench/memory.sh 100000 > $out/run.log 2>&1 ) &
sleep 175
curl -s -o $out/allocs0 http://127.0.0.1:22243/debug/pprof/allocs
curl -s -o $out/cpu "http://127.0.0.1:22243/debug/pprof/profile?seconds=30"
curl -s -o $out/allocs1 http://127.0.0.1:22243/debug/pprof/allocs
curl -s http://127.0.0.1:22243/metrics > $out/metrics
pkill -f "bench/memory.sh 100000"; pkill -f "port 22233"; sleep 2; pkill -9 -f 22233; echo done
