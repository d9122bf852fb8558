#!/usr/bin/env bash
# rates.sh OUT BUILDS...: for each offered rate R (RATES, default 4000 6000 8000 10000) and each
# build (a vigil binary: server and generator both), a fresh server on 23410/23411 and
# `vigil bench --api public --workers R --interval 1s --duration 40s --warmup 2s` (issue 7's
# scenario 4), builds interleaved per rate so that the box's other load hits them alike.
# Writes OUT/<build>-<R>.{json,txt,progress,uptime} and prints one row per run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=$1; shift
mkdir -p "$out"
for r in ${RATES:-4000 6000 8000 10000}; do
  for bin in "$@"; do
    name=$(basename "$bin")-$r
    dir=$(mktemp -d)
    "$bin" server start --db-filename "$dir/v.db" --port 23410 --http-port 23411 --history-port 23412 \
      --log-level warn >"$out/$name.server.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/23410) 2>/dev/null && break; sleep 0.1; done
    uptime >"$out/$name.uptime"
    "$bin" bench --address 127.0.0.1:23410 --server-pid $pid --api public --workers "$r" --interval 1s \
      --duration 40s --warmup 2s --json "$out/$name.json" >"$out/$name.txt" 2>"$out/$name.progress" || true
    uptime >>"$out/$name.uptime"
    kill $pid; wait $pid 2>/dev/null || true
    rm -rf "$dir"
    jq -r --arg n "$name" --arg la "$(awk -F'load average: ' '{print $2}' "$out/$name.uptime" | paste -sd' ')" \
      '"| \($n) | \(.offered_per_s|floor) | \(.throughput_per_s|floor) | \(.p50_ms) | \(.p99_ms) | \(.errors) | \(.heartbeats_missed) | \(.server.mean_cpu_pct|tostring|.[0:5]) | \(.generator.mean_cpu_pct|tostring|.[0:5]) | \($la) |"' "$out/$name.json"
  done
done
