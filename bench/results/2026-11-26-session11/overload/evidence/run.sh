#!/usr/bin/env bash
# one long 2x run: does the brake release killed workers' expiries on evidence, and no live one?
out=${OUT:-/tmp/vigil-evidence}; bin=${BIN:-bin/vigil}; name=${NAME:-ev}; mkdir -p "$out"
dir=$(mktemp -d)
env GOMAXPROCS=1 taskset -c 0 $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn > $out/$name.server.log 2>&1 &
spid=$!
sleep 2
env GOMAXPROCS=1 taskset -c 1 $bin bench --api liveness --address 127.0.0.1:21233 --server-pid $spid \
  --metrics-url http://127.0.0.1:21243/metrics --workers ${WORKERS:-20000} --interval 2.222s --lease 6.667s \
  --duration ${DURATION:-240s} --warmup 40s --kill 100 --json $out/$name.json > $out/$name.txt 2> $out/$name.progress
curl -s http://127.0.0.1:21243/metrics > $out/$name.metrics
kill $spid; wait $spid
rm -rf $dir
