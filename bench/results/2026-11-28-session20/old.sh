#!/usr/bin/env bash
# old.sh BIN TAG: issue 19's rows for another build, in this sitting (generator: this session's bin/vigil)
bin=$1; tag=$2; out=/tmp/s20/table/old; mkdir -p $out; gen=$(cd "$(dirname "$0")/../../.." && pwd)/bin/vigil
run() { # name args...
  local name=$1; shift; local dir; dir=$(mktemp -d)
  $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn > $out/$tag-$name.server.log 2>&1 &
  local spid=$!; sleep 2
  $gen bench --address 127.0.0.1:21233 --server-pid $spid --metrics-url http://127.0.0.1:21243/metrics --json $out/$tag-$name.json "$@" > $out/$tag-$name.txt 2> $out/$tag-$name.progress
  kill $spid; wait $spid; rm -rf $dir
  echo "$(date -u +%T) $tag-$name: $(grep -E '^throughput|^latency|^server|^burst  |^fleet' $out/$tag-$name.txt | tr '\n' ' ')"
}
run churn50 --api liveness --workers 1000 --activities 100 --interval 20s --duration 120s --churn 50 --churn-period 10s
run churn20 --api liveness --workers 1000 --activities 100 --interval 20s --duration 120s --churn 20 --churn-period 10s
run pub6000 --api public --workers 6000 --interval 1s --duration 60s --warmup 2s
run scale30000 --api public --workers 30000 --interval 10s --duration 100s --warmup 40s
run burst --api public --workers 20000 --interval 10s --duration 60s --warmup 10s --register-burst 20000
