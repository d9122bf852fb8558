#!/usr/bin/env bash
# churn2.sh: second runs of the churn rows, interleaved: now, 4786fc5, now
out=/tmp/s20/table/old; gen=$(cd "$(dirname "$0")/../../.." && pwd)/bin/vigil
run() { # bin tag churn
  local dir; dir=$(mktemp -d)
  $1 server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn > $out/$2-c$3.server.log 2>&1 &
  local spid=$!; sleep 2
  $gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid --workers 1000 --activities 100 --interval 20s --duration 120s --churn $3 --churn-period 10s --json $out/$2-c$3.json > $out/$2-c$3.txt 2> $out/$2-c$3.progress
  kill $spid; wait $spid; rm -rf $dir
  echo "$(date -u +%T) $2-c$3: $(grep -E '^latency|^server' $out/$2-c$3.txt | tr '\n' ' ')"
}
run /work/main/bin/vigil now2 20
run /tmp/s20/vigil-4786 old2 20
run /work/main/bin/vigil now2 50
