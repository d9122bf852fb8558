#!/usr/bin/env bash
# Scenario 1 of bench/scenarios.sh (churn 20 % and 50 %), main and this branch interleaved,
# each run on a fresh server, on ports 23200-23201.
#   run.sh OUT  (binaries in $BIN: vigil-main, vigil-bindings)
set -uo pipefail
out=$1; BIN=${BIN:-/tmp/bindings-bench}
mkdir -p "$out"
port=23200 http=23201
wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
run() { # name binary churn
  local name=$1 bin=$2 churn=$3 dir; dir=$(mktemp -d)
  "$bin" server start --db-filename "$dir/v.db" --port $port --http-port $http --log-level warn >"$out/$name.server.log" 2>&1 &
  local pid=$!
  wait_port $port
  { echo "== $name"; uptime; } >>"$out/uptime.txt"
  "$bin" bench --address 127.0.0.1:$port --server-pid $pid --metrics-url http://127.0.0.1:$http/metrics \
    --json "$out/$name.json" --api liveness --workers 1000 --activities 100 --interval 20s \
    --duration 120s --churn "$churn" --churn-period 10s >"$out/$name.txt" 2>"$out/$name.progress"
  uptime >>"$out/uptime.txt"
  curl -sf "http://127.0.0.1:$http/metrics" >"$out/$name.metrics"
  kill $pid; wait $pid 2>/dev/null
  rm -rf "$dir"
}
# ORDER="bindings main" runs this branch first in each pair.
for churn in 20 50; do
  for v in ${ORDER:-main bindings}; do
    run $v-churn$churn $BIN/vigil-$v $churn
  done
done
