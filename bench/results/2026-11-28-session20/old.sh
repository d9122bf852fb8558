#!/usr/bin/env bash
# old.sh BIN TAG [ROW...]: issue 19's rows for a build, in this sitting (generator: this checkout's
# bin/vigil). ROW is churn50, churn20, pub6000, scale30000 or burst; default all five.
# The second churn runs were `old.sh bin/vigil now2 churn20`, `old.sh BIN-4786fc5 old2 churn20`,
# `old.sh bin/vigil now2 churn50`, one after another.
bin=$1; tag=$2; shift 2
out=${OUT:-/tmp/s20/table/old}; mkdir -p $out; gen=$(cd "$(dirname "$0")/../../.." && pwd)/bin/vigil
run() { # name args...
  local name=$1; shift; local dir; dir=$(mktemp -d)
  $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn > $out/$tag-$name.server.log 2>&1 &
  local spid=$!; sleep 2
  $gen bench --address 127.0.0.1:21233 --server-pid $spid --metrics-url http://127.0.0.1:21243/metrics --json $out/$tag-$name.json "$@" > $out/$tag-$name.txt 2> $out/$tag-$name.progress
  kill $spid; wait $spid; rm -rf $dir
  echo "$(date -u +%T) $tag-$name: $(grep -E '^throughput|^latency|^server|^burst  |^fleet' $out/$tag-$name.txt | tr '\n' ' ')"
}
churn="--api liveness --workers 1000 --activities 100 --interval 20s --duration 120s --churn-period 10s"
for row in ${@:-churn50 churn20 pub6000 scale30000 burst}; do
  case $row in
  churn50) run churn50 $churn --churn 50 ;;
  churn20) run churn20 $churn --churn 20 ;;
  pub6000) run pub6000 --api public --workers 6000 --interval 1s --duration 60s --warmup 2s ;;
  scale30000) run scale30000 --api public --workers 30000 --interval 10s --duration 100s --warmup 40s ;;
  burst) run burst --api public --workers 20000 --interval 10s --duration 60s --warmup 10s --register-burst 20000 ;;
  *) echo "unknown row $row" >&2; exit 2 ;;
  esac
done
