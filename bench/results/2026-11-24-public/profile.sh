#!/usr/bin/env bash
# profile.sh TAG WORKERS INTERVAL DURATION: a fresh server (--pprof) on 23400/23401, one
# `vigil bench --api public` run with the generator's CPU and alloc profiles, and the
# server's CPU profile (30 s from second 8) and alloc profile.
set -euo pipefail
cd "$(dirname "$0")/../../.."
tag=$1 workers=$2 interval=$3 duration=${4:-45s}
out=bench/results/2026-11-24-public/$tag
mkdir -p "$out"
dir=$(mktemp -d)
${SERVER_BIN:-bin/vigil} server start --db-filename "$dir/v.db" --port 23400 --http-port 23401 --history-port 23402 \
  --pprof --log-level warn ${SERVER_ARGS:-} >"$out/server.log" 2>&1 &
pid=$!
for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/23400) 2>/dev/null && break; sleep 0.1; done
uptime >"$out/uptime.txt"
( sleep 8; curl -sf -o "$out/server.cpu.pprof" "http://127.0.0.1:23401/debug/pprof/profile?seconds=30" ) &
cp=$!
bin/vigil bench --address 127.0.0.1:23400 --server-pid $pid --api public --workers "$workers" \
  --interval "$interval" --duration "$duration" --warmup "$interval" \
  --cpuprofile "$out/gen.cpu.pprof" --memprofile "$out/gen.allocs.pprof" \
  --json "$out/bench.json" >"$out/bench.txt" 2>"$out/bench.progress" || true
wait $cp || true
curl -sf -o "$out/server.allocs.pprof" "http://127.0.0.1:23401/debug/pprof/allocs" || true
uptime >>"$out/uptime.txt"
kill $pid; wait $pid 2>/dev/null || true
rm -rf "$dir"
cat "$out/bench.txt"; cat "$out/uptime.txt"
