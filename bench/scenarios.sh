#!/usr/bin/env bash
# Runs the benchmark scenarios of issues 7 and 19 in one go, each on a fresh server, one server at a
# time, and writes every run's JSON summary plus summary.md into OUT (default
# bench-results/<UTC time>). See bench/README.md for what each figure means.
#
#   bench/scenarios.sh [OUT]
#   SCENARIOS="1 3" bench/scenarios.sh          # a subset
#   SCALE_NS="10000 20000" bench/scenarios.sh   # scenario 2's fleet sizes
#   RATES="1000 2000" bench/scenarios.sh        # scenario 4's heartbeat rates
#   SKIP_PEER=1 bench/scenarios.sh              # scenarios 4 and 5 against vigil only
#   CHURNS="20 50" bench/scenarios.sh           # scenario 1's churn percentages
#   BURST_BASE=20000 BURST=20000 bench/scenarios.sh   # scenario 5's fleet and burst sizes
#
# The generator shares the machine with the server: on a small machine, read the generator's
# own CPU in each JSON (generator.mean_cpu_pct) beside the server's.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${1:-bench-results/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"
scenarios="${SCENARIOS:-1 2 3 4 5}"
churns="${CHURNS:-0 20 50}"
burst_base="${BURST_BASE:-20000}" burst="${BURST:-20000}"
scale_ns="${SCALE_NS:-10000 20000 25000 30000 40000 60000}"
rates="${RATES:-1000 2000 4000}"
duration="${DURATION:-60s}"

vigil_port=17233 vigil_http=17243 peer_port=7234

go build -o bin/vigil ./cmd/vigil
{
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with local changes)')"
  echo "machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(uname -sr)"
  echo "started: $(date -u +%FT%TZ)"
} > "$out/machine.txt"

wait_port() { # host port seconds
  for _ in $(seq $((${3} * 10))); do
    if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on $1:$2" >&2
  return 1
}

# vigil_run NAME BENCH_ARGS...: a fresh vigil (new database) for one `vigil bench` run.
vigil_run() {
  local name=$1; shift
  local dir; dir=$(mktemp -d)
  bin/vigil server start --db-filename "$dir/v.db" --port $vigil_port --http-port $vigil_http \
    --log-level warn >"$out/$name.server.log" 2>&1 &
  local pid=$!
  wait_port 127.0.0.1 $vigil_port 30
  echo "== $name: vigil bench $*" >&2
  bin/vigil bench --address 127.0.0.1:$vigil_port --server-pid $pid \
    --metrics-url http://127.0.0.1:$vigil_http/metrics --json "$out/$name.json" "$@" \
    >"$out/$name.txt" 2>"$out/$name.progress" || true
  curl -sf "http://127.0.0.1:$vigil_http/metrics" >"$out/$name.metrics" || true
  kill $pid; wait $pid 2>/dev/null || true
  rm -rf "$dir"
  sed -n '/^offered/,/^generator/p' "$out/$name.txt" >&2
}

# peer_run NAME BENCH_ARGS...: a fresh stock Temporal (tools/peer) with its rate limits raised.
peer_run() {
  local name=$1; shift
  tools/peer/run.sh --port $peer_port --dynamic-config-value matching.rps=100000 \
    --dynamic-config-value frontend.rps=100000 --dynamic-config-value frontend.namespaceRPS=100000 \
    >"$out/$name.server.log" 2>&1 &
  local pid=$!
  # The first call builds the peer. It prints this line once its namespace is registered.
  for _ in $(seq 9000); do
    grep -q "peer listening on" "$out/$name.server.log" && break
    sleep 0.1
  done
  # run.sh execs the peer, so $pid is the server itself.
  echo "== $name: vigil bench $* (Temporal peer)" >&2
  bin/vigil bench --address 127.0.0.1:$peer_port --server-pid $pid --json "$out/$name.json" "$@" \
    >"$out/$name.txt" 2>"$out/$name.progress" || true
  kill $pid; wait $pid 2>/dev/null || true
  sed -n '/^offered/,/^generator/p' "$out/$name.txt" >&2
}

p99() { jq -r '.p99_ms' "$1"; }
clean() { jq -r '(.errors == 0) and (.heartbeats_missed == 0)' "$1"; }

for s in $scenarios; do
  case $s in
  1) # Temporal's published scenario.
    for churn in $churns; do
      vigil_run "s1-churn$churn" --api liveness --workers 1000 --activities 100 --interval 20s \
        --duration 120s --churn "$churn" --churn-period 10s
    done ;;
  2) # The largest N at a 10 s interval with p99 < 50 ms.
    for n in $scale_ns; do
      # The first interval is the fleet registering (N creates in 10 s); it is left out, so
      # the figure is the steady state. Scenario 4's first rows show registration included.
      vigil_run "s2-$n" --api public --workers "$n" --interval 10s --duration 70s --warmup 10s
      if [[ $(clean "$out/s2-$n.json") != true ]] || jq -e '.p99_ms >= 50' "$out/s2-$n.json" >/dev/null; then
        break
      fi
    done ;;
  3) # Recovery: 100 workers × 100 activities killed at once.
    vigil_run s3 --api liveness --workers 1000 --activities 100 --interval 10s --lease 30s \
      --duration "$duration" --kill 100 ;;
  4) # Side by side at equal rates: one worker per client heartbeating every second.
    for r in $rates; do
      vigil_run "s4-vigil-$r" --api public --workers "$r" --interval 1s --duration "$duration" --warmup 2s
      if [[ -z ${SKIP_PEER:-} ]]; then
        peer_run "s4-peer-$r" --api public --workers "$r" --interval 1s --duration "$duration" --warmup 2s
      fi
    done ;;
  5) # A registration burst: BURST workers send their first heartbeat at the same instant
    # while BURST_BASE registered workers heartbeat every 10 s.
    vigil_run s5-vigil --api public --workers "$burst_base" --interval 10s --duration "$duration" \
      --warmup 10s --register-burst "$burst"
    if [[ -z ${SKIP_PEER:-} ]]; then
      peer_run s5-peer --api public --workers "$burst_base" --interval 10s --duration "$duration" \
        --warmup 10s --register-burst "$burst"
    fi ;;
  *) echo "unknown scenario $s" >&2; exit 2 ;;
  esac
done

# summary.md: one row per run.
{
  cat "$out/machine.txt"
  echo
  echo "| run | offered/s | ok/s | p50 ms | p99 ms | max ms | errors | missed | server CPU % | server RSS MiB | generator CPU % | detection p99 ms | hand-back ms | burst registered ms | generator lag p99 ms |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for f in "$out"/*.json; do
    jq -r --arg run "$(basename "$f" .json)" '"| \($run) | \(.offered_per_s|floor) | \(.throughput_per_s|floor) | \(.p50_ms) | \(.p99_ms) | \(.max_ms) | \(.errors) | \(.heartbeats_missed) | \(.server.mean_cpu_pct // "-"|tostring|.[0:5]) | \(.server.max_rss_mib // "-"|tostring|.[0:6]) | \(.generator.mean_cpu_pct // "-"|tostring|.[0:5]) | \(.detection_p99_ms // "-") | \(.redispatch_all_ms // "-") | \(.burst_all_registered_ms // "-") | \(.schedule_lag_p99_ms // "-") |"' "$f"
  done
} >"$out/summary.md"
cat "$out/summary.md"
