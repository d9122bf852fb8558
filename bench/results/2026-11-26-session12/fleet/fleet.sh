#!/usr/bin/env bash
# the 100,000-worker run, pinned (server CPU 0, generator CPU 1, GOMAXPROCS=1 each)
# usage: OUT=dir [GEN=generator-binary] fleet.sh BIN NAME [server flags]
# LOAD replaces the load flags (eff.sh); the default is the run.
out=${OUT:-/tmp/vigil-fleet}; mkdir -p "$out"; bin=$1; name=$2; shift 2
gen=${GEN:-$bin}
load=${LOAD:---interval 30s --lease 90s --duration 200s --warmup 60s --kill 100 --recovery-timeout 60s}
if ss -ltn | grep -q ":21233 "; then echo "port busy" >&2; exit 1; fi
dir=$(mktemp -d)
env GOMAXPROCS=1 taskset -c 0 $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn "$@" > $out/$name.server.log 2>&1 &
spid=$!
sleep 2
env GOMAXPROCS=1 taskset -c 1 $gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid \
  --metrics-url http://127.0.0.1:21243/metrics --workers 100000 $load --json $out/$name.json > $out/$name.txt 2> $out/$name.progress
curl -s http://127.0.0.1:21243/metrics > $out/$name.metrics
kill $spid; wait $spid
rm -rf $dir
