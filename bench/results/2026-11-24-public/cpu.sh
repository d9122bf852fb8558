#!/usr/bin/env bash
# cpu.sh OUT RATE BUILDS...: steady-state CPU per heartbeat. For each build (server and
# generator both), a fresh server on 23420-23422 and `vigil bench --api public --workers RATE
# --interval 1s --duration 45s`; the server's and the generator's utime+stime are read from
# /proc at seconds 10 and 40, so registration and shutdown are left out. Prints µs of CPU per
# heartbeat offered (server, generator) with the run's p50/p99 and errors.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=$1 rate=$2; shift 2
mkdir -p "$out"
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
for bin in "$@"; do
  name=$(basename "$bin")-$rate
  dir=$(mktemp -d)
  "$bin" server start --db-filename "$dir/v.db" --port 23420 --http-port 23421 --history-port 23422 \
    --log-level warn >"$out/$name.server.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/23420) 2>/dev/null && break; sleep 0.1; done
  "$bin" bench --address 127.0.0.1:23420 --server-pid $pid --api public --workers "$rate" --interval 1s \
    --duration 45s --warmup 2s --json "$out/$name.json" >"$out/$name.txt" 2>"$out/$name.progress" &
  gen=$!
  sleep 10; s0=$(cpu $pid); g0=$(cpu $gen); l0=$(cut -d' ' -f1 /proc/loadavg)
  sleep 30; s1=$(cpu $pid); g1=$(cpu $gen); l1=$(cut -d' ' -f1 /proc/loadavg)
  wait $gen || true
  kill $pid; wait $pid 2>/dev/null || true
  rm -rf "$dir"
  awk -v n="$name" -v s=$((s1-s0)) -v g=$((g1-g0)) -v t=$tick -v r="$rate" -v l0="$l0" -v l1="$l1" \
    -v p50="$(jq .p50_ms "$out/$name.json")" -v p99="$(jq .p99_ms "$out/$name.json")" -v e="$(jq .errors "$out/$name.json")" \
    'BEGIN{printf "| %s | %.0f | %.0f | %.0f | %s | %s | %s | %s→%s |\n", n, s/t/(r*30)*1e6, g/t/(r*30)*1e6, (s+g)/t/(r*30)*1e6, p50, p99, e, l0, l1}' | tee -a "$out/cpu.md"
done
