#!/usr/bin/env bash
# scale.sh N...: fleets of N workers at a 10 s interval on the public API (100 s, 40 s warm-up),
# a fresh server each, into OUT (default /tmp/s20/table/scale). table.sh runs it for its row 3.
out=${OUT:-/tmp/s20/table/scale}; mkdir -p "$out"; cd "$(dirname "$0")/../../.."
for n in "$@"; do
  dir=$(mktemp -d)
  bin/vigil server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn > "$out/$n.server.log" 2>&1 &
  spid=$!; sleep 2
  bin/vigil bench --api public --address 127.0.0.1:21233 --server-pid $spid --metrics-url http://127.0.0.1:21243/metrics --workers $n --interval 10s --duration 100s --warmup 40s --json "$out/$n.json" > "$out/$n.txt" 2> "$out/$n.progress"
  curl -s http://127.0.0.1:21243/metrics > "$out/$n.metrics"
  kill $spid; wait $spid; rm -rf $dir
  echo "$(date -u +%T) scale $n: $(grep -E '^throughput|^latency|^server|^generator' "$out/$n.txt" | tr '\n' ' ')"
done
