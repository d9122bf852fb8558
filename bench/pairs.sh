#!/usr/bin/env bash
# bench/pairs.sh: measures two builds of vigil against each other in the same minutes, the only
# fair comparison on a machine whose speed drifts. Runs of the two alternate, A B B A A B ...,
# PAIRS pairs of each scenario, each run on a fresh database, and the summary prints each
# build's median and spread per figure (go run ./bench/pairs).
#
#   bench/pairs.sh OLD_BINARY NEW_BINARY                   # every scenario, 3 pairs
#   PAIRS=4 SCENARIOS="overload-giveup overload-retry" bench/pairs.sh bin/vigil.old bin/vigil
#   CAPACITY=10000 bench/pairs.sh ...                      # base rate of the overload runs
#   OUT=/tmp/p bench/pairs.sh ...                          # raw outputs (default bench-results/pairs-<time>)
#   LOG_LEVEL=info bench/pairs.sh ...                      # the servers' log level (default warn)
#
# Scenarios (SCENARIOS):
#   overload-giveup  20,000 workers on the liveness API alternating every 20 s between CAPACITY
#                    and twice it (vigil bench --alternate 2), callers giving up on a refusal;
#                    server and generator pinned to one core each
#   overload-retry   the same, callers retrying refusals as the SDKs do
#   fleet50k         50,000 workers at a 15 s interval, all registering at once, 50 killed
#   fleet100k        100,000 workers at a 30 s interval, all registering at once, 100 killed
#   burst            20,000 workers register at one instant while 20,000 registered ones heartbeat
#                    every 10 s (public API), refusals retried (as bench/run.sh's burst section)
#   cost             2,000 SDK-style workers heartbeating every second on the public API, the
#                    server's CPU per heartbeat over a steady 16 s window (as bench/cost.sh);
#                    server and generator pinned to one core each
#   cost-written     the same rate from 30,000 SDK-style workers heartbeating every 15 s: every
#                    heartbeat is written and its worker decoded, as for a fleet at the SDK's
#                    default interval; pinned as cost
set -euo pipefail

if (($# != 2)); then
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
a=$(realpath "$1") b=$(realpath "$2")
cd "$root"
out="${OUT:-bench-results/pairs-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
pairs="${PAIRS:-3}"
scenarios="${SCENARIOS:-overload-giveup overload-retry fleet50k fleet100k}"
capacity="${CAPACITY:-10000}"
port="${PORT:-17233}" http=$((${PORT:-17233} + 10))
{
  echo "a: $a"
  echo "b: $b"
  echo "cpu: $(nproc) x $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
  echo "memory: $(free -g | awk '/^Mem:/ {print $2}') GiB"
  echo "capacity: $capacity"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"

log() { echo "$(date -u +%T) $*" | tee -a "$out/run.log" >&2; }

wait_port() { # port seconds
  for _ in $(seq $(($2 * 10))); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  return 1
}

# run NAME BINARY PIN BENCH_ARGS...: one `vigil bench` against a fresh server of BINARY.
run() {
  local name=$1 bin=$2 pin=$3; shift 3
  local dir spid srv=() gen=()
  if [[ $pin == 1 && $(nproc) -ge 2 ]] && command -v taskset >/dev/null; then
    srv=(env GOMAXPROCS=1 taskset -c 0) gen=(env GOMAXPROCS=1 taskset -c 1)
  fi
  dir=$(mktemp -d)
  "${srv[@]}" "$bin" server start --db-filename "$dir/v.db" --port "$port" --http-port "$http" \
    --log-level "${LOG_LEVEL:-warn}" >"$out/$name.server.log" 2>&1 &
  spid=$!
  wait_port "$port" 60
  if ! kill -0 "$spid" 2>/dev/null; then
    # Something else holds the port: measuring it would be measuring the wrong server.
    log "$name: $(basename "$bin") server start failed (see $name.server.log); stopping"
    exit 1
  fi
  log "$name: $(basename "$bin") bench $*"
  "${gen[@]}" "$bin" bench --address "127.0.0.1:$port" --server-pid "$spid" \
    --metrics-url "http://127.0.0.1:$http/metrics" --json "$out/$name.json" "$@" \
    >"$out/$name.txt" 2>"$out/$name.progress" || log "$name: vigil bench exited $?"
  curl -sf "http://127.0.0.1:$http/metrics" >"$out/$name.metrics" || true
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  rm -rf "$dir"
}

scenario() { # SCENARIO BUILD_TAG BINARY PAIR
  local s=$1 tag=$2 bin=$3 i=$4
  local iv lease
  iv=$(awk -v r="$capacity" 'BEGIN {printf "%.3fs", 20000 / r}')
  lease=$(awk -v r="$capacity" 'BEGIN {printf "%.3fs", 3 * 20000 / r}')
  case $s in
  overload-giveup)
    run "$s.$tag.$i" "$bin" 1 --api liveness --workers 20000 --interval "$iv" --lease "$lease" \
      --duration 200s --warmup 40s --alternate 2 --alternate-period 20s --alternate-settle 5s ;;
  overload-retry)
    run "$s.$tag.$i" "$bin" 1 --api liveness --workers 20000 --interval "$iv" --lease "$lease" \
      --duration 200s --warmup 40s --alternate 2 --alternate-period 20s --alternate-settle 5s \
      --retry-resource-exhausted ;;
  fleet50k)
    run "$s.$tag.$i" "$bin" 0 --api liveness --workers 50000 --interval 15s --lease 45s \
      --duration 120s --warmup 30s --kill 50 ;;
  fleet100k)
    run "$s.$tag.$i" "$bin" 0 --api liveness --workers 100000 --interval 30s --lease 90s \
      --duration 200s --warmup 60s --kill 100 ;;
  burst)
    run "$s.$tag.$i" "$bin" 0 --api public --workers 20000 --interval 10s --duration 60s \
      --warmup 10s --register-burst 20000 ;;
  cost)
    run "$s.$tag.$i" "$bin" 1 --api public --workers 2000 --interval 1s --duration 30s \
      --warmup 10s --cpu-window 16s ;;
  cost-written)
    run "$s.$tag.$i" "$bin" 1 --api public --workers 30000 --interval 15s --duration 50s \
      --warmup 30s --cpu-window 16s ;;
  *) log "unknown scenario $s"; return 1 ;;
  esac
}

for s in $scenarios; do
  for i in $(seq "$pairs"); do
    if ((i % 2)); then
      scenario "$s" a "$a" "$i"; scenario "$s" b "$b" "$i"
    else
      scenario "$s" b "$b" "$i"; scenario "$s" a "$a" "$i"
    fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
go run ./bench/pairs -results "$out" | tee "$out/summary.txt"
