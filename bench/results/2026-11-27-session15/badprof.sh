#!/usr/bin/env bash
# badprof.sh NAME: 6,000/s at 20,000 workers with back-to-back 20 s CPU profiles and per-second samples
name=$1; out=/tmp/s15/bad; bin=/tmp/s15/vigil; gen=/tmp/s15/gen
while ss -ltn | grep -q ":21233 "; do sleep 5; done
dir=$(mktemp -d)
env GOMAXPROCS=1 taskset -c 0 $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn --pprof > $out/$name.server.log 2>&1 &
spid=$!; sleep 2
taskset -c 1 /work/main/bench/results/2026-11-27-session13/sample.sh $spid $out/$name.samples > /dev/null 2>&1 &
smp=$!
env GOMAXPROCS=1 taskset -c 1 $gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid \
  --metrics-url http://127.0.0.1:21243/metrics --workers 20000 --interval 3.333s --lease 10s \
  --duration 170s --warmup 40s --json $out/$name.json > $out/$name.txt 2> $out/$name.progress &
gpid=$!
sleep 40
for i in 1 2 3 4 5 6; do curl -s -o $out/$name.cpu$i "http://127.0.0.1:21243/debug/pprof/profile?seconds=20"; done
wait $gpid
kill $smp; kill $spid; wait $spid; rm -rf $dir
