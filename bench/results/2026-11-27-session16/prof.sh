#!/usr/bin/env bash
# 2x load with profiles: $1 = server binary, $2 = name
bin=$1; name=$2; out=/tmp/s16/prof; gen=/tmp/s16/gen
while ss -ltn | grep -q ":21233 "; do sleep 5; done
dir=$(mktemp -d)
env GOMAXPROCS=1 taskset -c 0 $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn --pprof $SFLAGS > $out/$name.server.log 2>&1 &
spid=$!; sleep 2
env GOMAXPROCS=1 taskset -c 1 $gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid \
  --metrics-url http://127.0.0.1:21243/metrics --workers 20000 --interval $3 --lease $4 \
  --duration 150s --warmup 40s --json $out/$name.json > $out/$name.txt 2> $out/$name.progress &
gpid=$!
sleep 80
curl -s -o $out/$name.allocs0 http://127.0.0.1:21243/debug/pprof/allocs
curl -s -o $out/$name.cpu "http://127.0.0.1:21243/debug/pprof/profile?seconds=30"
curl -s -o $out/$name.allocs1 http://127.0.0.1:21243/debug/pprof/allocs
wait $gpid
curl -s http://127.0.0.1:21243/metrics > $out/$name.metrics
kill $spid; wait $spid; rm -rf $dir
