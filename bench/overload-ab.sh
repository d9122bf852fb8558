#!/usr/bin/env bash
# bench/overload-ab.sh OUT NAME=BIN [NAME=BIN ...]: issue 18's overload run, builds interleaved.
# "NAME=BIN ARGS" (quoted) also passes ARGS to that build's server only.
#
# One pinned core each (server on CPU 0, generator on CPU 1, GOMAXPROCS=1): WORKERS (20,000)
# liveness workers at INTERVAL (2.222 s), i.e. 9,000 heartbeats/s offered, twice the 4,500/s
# this core carried at p99 <= 1 s on 2026-11-26; lease LEASE (6.667 s); KILL (100) workers
# killed; a 40 s warm-up, so that the fleet's registration (1,000/s per caller) is outside the
# window; each run stopped after 150 s. Every build runs once per round (ROUNDS, default
# "1 2"), in the order given. SERVER_ARGS adds flags to every server. NAME.samples has, every
# 5 s, the server's admission limit and queue, the heartbeats outstanding at the frontend, its
# GOGC and the steal on its core.
#   bench/overload-ab.sh /tmp/ab base=/tmp/vigil-base new=bin/vigil
#   bench/overload-ab.sh /tmp/ab base=bin/vigil "off=bin/vigil --dynamic-config-file off.yaml"
set -euo pipefail
out=$1; shift
mkdir -p "$out"
workers=${WORKERS:-20000} interval=${INTERVAL:-2.222s} lease=${LEASE:-6.667s} kill_n=${KILL:-100}
# The hypervisor's steal on the server's core (CPU 0) during a run, in % of the core: a run
# that lost a tenth of its core to a neighbour is not comparable with one that did not.
steal_ticks() { awk '$1 == "cpu0" {print $9; exit}' /proc/stat; }
run() { # name bin [server args...]
  local name=$1 bin=$2 dir spid gpid s0 t0 steal
  shift 2
  s0=$(steal_ticks) t0=$SECONDS
  dir=$(mktemp -d)
  # shellcheck disable=SC2086
  env GOMAXPROCS=1 taskset -c 0 "$bin" server start --db-filename "$dir/v.db" --port 21233 --http-port 21243 --log-level warn ${SERVER_ARGS:-} "$@" > "$out/$name.server.log" 2>&1 &
  spid=$!
  sleep 2
  env GOMAXPROCS=1 taskset -c 1 "$bin" bench --api liveness --address 127.0.0.1:21233 --server-pid "$spid" \
    --metrics-url http://127.0.0.1:21243/metrics --workers "$workers" --interval "$interval" --lease "$lease" \
    --duration 110s --warmup 40s --kill "$kill_n" --json "$out/$name.json" > "$out/$name.txt" 2> "$out/$name.progress" &
  gpid=$!
  # Every 5 s: the server's admission (in-flight limit, queue), GOGC, and the steal so far.
  (
    while kill -0 "$spid" 2>/dev/null; do
      printf '%s steal_ticks=%s ' "$((SECONDS - t0))" "$(($(steal_ticks) - s0))"
      curl -sf http://127.0.0.1:21243/metrics | awk '/^vigil_(admission_in_flight_limit|admission_queued|heartbeats_outstanding|gc_percent) / {printf "%s=%s ", $1, $2}'
      echo
      sleep 5
    done
  ) > "$out/$name.samples" 2>/dev/null &
  sleep 150; kill -INT "$gpid" 2>/dev/null || true; wait "$gpid" || true
  curl -s http://127.0.0.1:21243/metrics > "$out/$name.metrics" || true
  kill "$spid"; wait "$spid" || true
  rm -rf "$dir"
  steal=$(( ($(steal_ticks) - s0) * 100 / $(getconf CLK_TCK) / (SECONDS - t0) ))
  echo "$name $(grep -E '^throughput' "$out/$name.txt" || echo '(no summary)') steal ${steal}%" >> "$out/summary"
}
for r in ${ROUNDS:-1 2}; do
  for pair in "$@"; do
    read -r -a build <<< "${pair#*=}"
    run "${pair%%=*}$r" "${build[@]}"
  done
done
