#!/usr/bin/env bash
# bench/run.sh: runs every scenario of BENCHMARKS.md, one server at a time, each on a fresh
# database, writes the raw outputs under OUT (default bench-results/<UTC time>, ignored by git)
# and regenerates BENCHMARKS.md's tables from them (go run ./bench/page).
#
#   bench/run.sh                       # the whole page: about an hour and a half on two cores
#   bench/run.sh --quick               # every scenario at a small size: a few minutes, to check
#                                      # the machinery; its tables are not for publishing
#   bench/run.sh --no-page             # results only, BENCHMARKS.md untouched
#   SCENARIOS="recovery fleet" bench/run.sh    # a subset; the other tables keep their figures
#   SKIP_PEER=1 bench/run.sh           # vigil only (the Temporal peer's first build takes 10+ min)
#   CAPACITY=10000 bench/run.sh        # skip the capacity ladder; base rate of the overload runs
#   OUT=/tmp/b bench/run.sh
#
# Scenarios (SCENARIOS, in this order by default):
#   churn      Temporal's published scenario: 1,000 workers x 100 activities, a heartbeat every
#              20 s, 120 s, 0/20/50 % of the workers restarting every 10 s (liveness API)
#   scale      the largest fleet at a 10 s interval with p99 < 50 ms (SDK heartbeats)
#   recovery   100 workers holding 100 activities each killed at once: detection, hand-back
#   equal      vigil and stock Temporal side by side at equal SDK heartbeat rates
#   burst      20,000 workers registering at once beside 20,000 heartbeating, both servers
#   capacity   the highest rate one pinned core carries at >= 98 % with p99 <= 1 s
#   overload   capacity and twice it, alternating in the same minutes (vigil bench --alternate),
#              for callers that give up on a refusal and for callers that retry as the SDK does
#   fleet      100,000 workers at a 30 s interval, 100 of them killed
#   memory     RSS per idle registered worker at 100,000, and whether it is given back: a fleet
#              on the liveness API and one of SDK workers, side by side
#   postgres   SDK heartbeats at equal rates on PostgreSQL: one host, then three hosts of one
#              cluster behind a client that balances over them (VIGIL_POSTGRES_DSN, default
#              postgres://postgres@127.0.0.1:5432/test; a fresh schema per run, dropped after
#              with psql when it is installed)
#   cost       the server's CPU per heartbeat at 2,000 SDK heartbeats/s: vigil on SQLite, vigil
#              on PostgreSQL (with PostgreSQL's processes' CPU), the gRPC + SQLite floors
#              (upsert and append-only log), the gRPC floor (tools/floor) and stock Temporal,
#              alternating round after round (COST_ROUNDS, default 3) so that each round shares
#              the same minutes; then vigil and both storing floors at the same rate from 30,000
#              workers every 15 s, where vigil writes every heartbeat; bench/cost.sh runs it alone
#
# capacity, overload and cost pin the server to CPU 0 and the generator to CPU 1 (GOMAXPROCS 1
# each) when the machine has two cores or more; the others share every core, as a small
# deployment would. The generator's own CPU is in each run's JSON beside the server's. On a
# shared or busy machine every figure is pessimistic: machine.txt records the load average
# before and after.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

quick=0 page=1
for arg in "$@"; do
  case $arg in
  --quick) quick=1 ;;
  --no-page) page=0 ;;
  -h | --help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench/run.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

out="${OUT:-bench-results/$(date -u +%Y%m%dT%H%M%SZ)$([[ $quick == 1 ]] && echo -quick || true)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
all_scenarios="churn scale recovery equal burst capacity overload fleet memory postgres cost"
scenarios="${SCENARIOS:-$all_scenarios}"
port="${PORT:-17233}" http=$((${PORT:-17233} + 10)) peer_port="${PEER_PORT:-17234}" floor_port="${FLOOR_PORT:-17235}"

# Sizes: the published ones, or small ones that exercise the same code in a few minutes.
if [[ $quick == 1 ]]; then
  churn_args=(--workers 100 --activities 10 --interval 2s --duration 20s --churn-period 2s)
  scale_ns="${SCALE_NS:-1000 2000}" scale_args=(--interval 2s --duration 14s --warmup 4s)
  recovery_args=(--workers 100 --activities 10 --interval 1s --lease 3s --duration 10s --kill 10)
  rates="${RATES:-200 400}" equal_args=(--duration 10s --warmup 2s)
  burst_args=(--workers 500 --interval 2s --duration 14s --warmup 4s --register-burst 500)
  ladder="${LADDER:-500 1000}" ladder_workers=1000 ladder_args=(--duration 12s --warmup 4s)
  overload_workers=1000 overload_args=(--duration 48s --warmup 8s --alternate 2 --alternate-period 10s --alternate-settle 3s)
  fleet_args=(--workers 2000 --interval 5s --lease 15s --duration 40s --warmup 10s --kill 10)
  memory_ns="${MEMORY_NS:-2000}" memory_env=(INTERVAL=5s LEASE=15s SETTLE=10s)
  pg_rates="${PG_RATES:-200}" pg_args=(--duration 10s --warmup 2s)
  cost_rounds="${COST_ROUNDS:-1}" cost_args=(--workers 200 --interval 1s --duration 12s --warmup 4s --cpu-window 6s)
  cost_written_args=(--workers 1000 --interval 15s --duration 34s --warmup 20s --cpu-window 10s)
else
  churn_args=(--workers 1000 --activities 100 --interval 20s --duration 120s --churn-period 10s)
  scale_ns="${SCALE_NS:-10000 20000 25000 30000 40000 50000 100000}"
  scale_args=(--interval 10s --duration 100s --warmup 40s)
  recovery_args=(--workers 1000 --activities 100 --interval 10s --lease 30s --duration 60s --kill 100)
  rates="${RATES:-1000 2000 4000 6000 8000 10000}" equal_args=(--duration 60s --warmup 2s)
  burst_args=(--workers 20000 --interval 10s --duration 60s --warmup 10s --register-burst 20000)
  ladder="${LADDER:-4000 6000 8000 10000 12000}" ladder_workers=20000 ladder_args=(--duration 100s --warmup 40s)
  overload_workers=20000 overload_args=(--duration 360s --warmup 40s --alternate 2 --alternate-period 20s --alternate-settle 5s)
  fleet_args=(--workers 100000 --interval 30s --lease 90s --duration 200s --warmup 60s --kill 100)
  memory_ns="${MEMORY_NS:-100000}" memory_env=(INTERVAL=120s LEASE=180s SETTLE=150s)
  pg_rates="${PG_RATES:-1000 2000 4000}" pg_args=(--duration 60s --warmup 5s)
  # 2,000 workers heartbeating every second: well below one core's capacity for each server.
  # The first 10 s (the fleet registering, the server warming) and the last 4 s are left out of
  # the 16 s window.
  cost_rounds="${COST_ROUNDS:-3}" cost_args=(--workers 2000 --interval 1s --duration 30s --warmup 10s --cpu-window 16s)
  # The same rate from 30,000 workers every 15 s: no heartbeat comes within
  # worker.heartbeatWriteInterval (10 s) of its worker's last written one, so every one is
  # written, as for a fleet at the SDK's default interval of 60 s. The fleet registers in the
  # first 15 s; the window starts after another round of its heartbeats.
  cost_written_args=(--workers 30000 --interval 15s --duration 50s --warmup 30s --cpu-window 16s)
fi
pg_dsn="${VIGIL_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
# pg_pid is the local PostgreSQL's postmaster, whose process tree vigil bench --store-pid reads:
# VIGIL_POSTGRES_PID, or the oldest process named postgres; empty when it runs elsewhere.
pg_pid="${VIGIL_POSTGRES_PID:-$(pgrep -o -x postgres || true)}"

log() { echo "$(date -u +%T) $*" | tee -a "$out/run.log" >&2; }

go build -o bin/vigil ./cmd/vigil
if [[ " $scenarios " == *" cost "* ]]; then
  (cd tools/floor && go build -o ../../bin/vigil-floor .)
fi
{
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . ':!BENCHMARKS.md' 2>/dev/null || echo ' (with local changes)')"
  echo "date: $(date -u +%F)"
  echo "cpu: $(nproc) x $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
  echo "memory: $(free -g | awk '/^Mem:/ {print $2}') GiB"
  echo "kernel: $(uname -sr)"
  echo "disk: $(df -T "$out" | awk 'NR == 2 {print $2}')"
  echo "go: $(go env GOVERSION)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "mode: $([[ $quick == 1 ]] && echo quick || echo full)"
  echo "scenarios: $scenarios"
  echo "all scenarios: $([[ $scenarios == "$all_scenarios" ]] && echo yes || echo no)"
} >"$out/machine.txt"

wait_port() { # host port seconds
  for _ in $(seq $(($3 * 10))); do
    if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on $1:$2" >&2
  return 1
}

# wait_line FILE TEXT PID SECONDS: waits until FILE holds TEXT; fails if PID exits first or
# the time runs out.
wait_line() {
  for _ in $(seq $(($4 * 10))); do
    grep -q "$2" "$1" && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

server_args=()
pinned=0
if [[ $(nproc) -ge 2 ]] && command -v taskset >/dev/null; then pinned=1; fi

# pin PIN: srv and gen become the prefixes that pin a server to CPU 0 and the generator to
# CPU 1, GOMAXPROCS 1 each, when PIN is 1 and the machine can; empty otherwise.
pin() {
  srv=() gen=()
  if [[ $1 == 1 && $pinned == 1 ]]; then
    srv=(env GOMAXPROCS=1 taskset -c 0) gen=(env GOMAXPROCS=1 taskset -c 1)
  fi
}

# vigil_run NAME PIN BENCH_ARGS...: a fresh vigil (new SQLite database) for one `vigil bench`.
vigil_run() {
  local name=$1 pin=$2; shift 2
  local dir spid srv gen
  pin "$pin"
  dir=$(mktemp -d)
  "${srv[@]}" bin/vigil server start --db-filename "$dir/v.db" --port "$port" --http-port "$http" \
    --log-level warn "${server_args[@]}" >"$out/$name.server.log" 2>&1 &
  spid=$!
  wait_port 127.0.0.1 "$port" 60
  # Something else on the port (another checkout's server) would be measured instead.
  if ! kill -0 "$spid" 2>/dev/null; then
    log "$name: vigil did not start (see $name.server.log); PORT=N picks other ports"
    rm -rf "$dir"
    return 0
  fi
  log "$name: vigil bench $*"
  "${gen[@]}" bin/vigil bench --address "127.0.0.1:$port" --server-pid "$spid" \
    --metrics-url "http://127.0.0.1:$http/metrics" --json "$out/$name.json" "$@" \
    >"$out/$name.txt" 2>"$out/$name.progress" || log "$name: vigil bench exited $?"
  curl -sf "http://127.0.0.1:$http/metrics" >"$out/$name.metrics" || true
  kill "$spid"; wait "$spid" 2>/dev/null || true
  rm -rf "$dir"
  grep -E '^(throughput|latency|server cost)' "$out/$name.txt" | sed "s/^/  /" >&2 || true
}

# peer_run NAME PIN BENCH_ARGS...: a fresh stock Temporal (tools/peer) with its rate limits
# raised.
peer_run() {
  local name=$1 pin=$2; shift 2
  local srv gen
  if [[ -n ${SKIP_PEER:-} ]]; then return 0; fi
  pin "$pin"
  "${srv[@]}" tools/peer/run.sh --port "$peer_port" --dynamic-config-value matching.rps=100000 \
    --dynamic-config-value frontend.rps=100000 --dynamic-config-value frontend.namespaceRPS=100000 \
    >"$out/$name.server.log" 2>&1 &
  local pid=$!
  # The first call builds the peer; it prints this line once its namespace is registered.
  if ! wait_line "$out/$name.server.log" "peer listening on" "$pid" 1200; then
    log "$name: the peer did not start (see $name.server.log)"
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
    return 0
  fi
  log "$name: vigil bench $* (stock Temporal)"
  # run.sh execs the peer (and taskset and env exec it), so $pid is the server itself.
  "${gen[@]}" bin/vigil bench --address "127.0.0.1:$peer_port" --server-pid "$pid" --json "$out/$name.json" "$@" \
    >"$out/$name.txt" 2>"$out/$name.progress" || log "$name: vigil bench exited $?"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  grep -E '^(throughput|latency|server cost)' "$out/$name.txt" | sed "s/^/  /" >&2 || true
}

# floor_run NAME STORE BENCH_ARGS...: a fresh tools/floor (STORE none, sqlite or sqlite-log, on
# a new database), pinned like the cost scenario's other servers.
floor_run() {
  local name=$1 store=$2; shift 2
  local dir pid srv gen db=()
  pin 1
  dir=$(mktemp -d)
  if [[ $store == sqlite* ]]; then db=(-db "$dir/floor.db"); fi
  "${srv[@]}" bin/vigil-floor -address "127.0.0.1:$floor_port" -store "$store" "${db[@]}" >"$out/$name.server.log" 2>&1 &
  pid=$!
  if ! wait_line "$out/$name.server.log" "floor listening on" "$pid" 30; then
    log "$name: the floor did not start (see $name.server.log)"
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
    return 0
  fi
  log "$name: vigil bench $* (floor, store $store)"
  "${gen[@]}" bin/vigil bench --address "127.0.0.1:$floor_port" --server-pid "$pid" --json "$out/$name.json" "$@" \
    >"$out/$name.txt" 2>"$out/$name.progress" || log "$name: vigil bench exited $?"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
  grep -E '^(throughput|latency|server cost)' "$out/$name.txt" | sed "s/^/  /" >&2 || true
}

# pg_config FILE SCHEMA: a static configuration putting vigil on PostgreSQL in SCHEMA.
pg_config() {
  printf 'persistence:\n  driver: postgres\n  postgres:\n    dsn: "%s"\n    schema: %s\n' "$pg_dsn" "$2" >"$1"
}
pg_drop() { # schema
  if command -v psql >/dev/null; then
    psql -q "$pg_dsn" -c "DROP SCHEMA IF EXISTS $1 CASCADE" >/dev/null 2>&1 || log "could not drop schema $1"
  else
    log "psql not found: schema $1 left in the database"
  fi
}

# cluster_run NAME HOSTS PIN BENCH_ARGS...: HOSTS fresh vigil hosts on one PostgreSQL schema, and
# one `vigil bench` balancing over all of them (host 1's process is sampled), pinned when PIN is 1
# (with one host: as the cost scenario's other servers). The CPU of PostgreSQL's processes is
# read beside the server's (--store-pid pg_pid) when PostgreSQL runs on this machine; it is
# never pinned, and /proc counts its CPU wherever it runs.
cluster_run() {
  local name=$1 hosts=$2 pin_arg=$3; shift 3
  local schema="vigil_bench_$$_$RANDOM" dir pids=() addrs=() i store=() srv gen
  pin "$pin_arg"
  if [[ -n $pg_pid ]]; then store=(--store-pid "$pg_pid"); fi
  dir=$(mktemp -d)
  pg_config "$dir/server.yaml" "$schema"
  for i in $(seq 0 $((hosts - 1))); do
    "${srv[@]}" bin/vigil server start --config "$dir/server.yaml" --port $((port + i)) --http-port $((http + i)) \
      --history-port $((port + 100 + i)) --log-level warn >"$out/$name.server$i.log" 2>&1 &
    pids+=($!) addrs+=("127.0.0.1:$((port + i))")
  done
  for i in $(seq 0 $((hosts - 1))); do
    wait_port 127.0.0.1 $((port + i)) 60
    for _ in $(seq 300); do curl -sf "http://127.0.0.1:$((http + i))/readyz" >/dev/null && break; sleep 0.2; done
  done
  log "$name: vigil bench $* ($hosts host(s) on PostgreSQL)"
  "${gen[@]}" bin/vigil bench --address "$(IFS=,; echo "${addrs[*]}")" --server-pid "${pids[0]}" "${store[@]}" \
    --retry-unavailable --metrics-url "http://127.0.0.1:$http/metrics" --json "$out/$name.json" "$@" \
    >"$out/$name.txt" 2>"$out/$name.progress" || log "$name: vigil bench exited $?"
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
  pg_drop "$schema"
  rm -rf "$dir"
  grep -E '^(throughput|latency|server cost|store cost)' "$out/$name.txt" | sed "s/^/  /" >&2 || true
}

for s in $scenarios; do
  case $s in
  churn)
    for c in 0 20 50; do
      vigil_run "churn-$c" 0 --api liveness "${churn_args[@]}" --churn "$c"
    done ;;
  scale)
    for n in $scale_ns; do
      vigil_run "scale-$n" 0 --api public --workers "$n" "${scale_args[@]}"
      # Stop at the first size that misses the bar (p99 >= 50 ms, errors or missed slots).
      if jq -e '.p99_ms >= 50 or .errors > 0 or .heartbeats_missed > 0' "$out/scale-$n.json" >/dev/null 2>&1; then
        break
      fi
    done ;;
  recovery)
    vigil_run recovery 0 --api liveness "${recovery_args[@]}" ;;
  equal)
    for r in $rates; do
      vigil_run "equal-vigil-$r" 0 --api public --workers "$r" --interval 1s "${equal_args[@]}"
      peer_run "equal-peer-$r" 0 --api public --workers "$r" --interval 1s "${equal_args[@]}"
    done ;;
  burst)
    vigil_run burst-vigil 0 --api public "${burst_args[@]}"
    peer_run burst-peer 0 --api public "${burst_args[@]}" ;;
  capacity)
    # Offered rate R by a fleet of ladder_workers: interval = workers / R, lease 3 intervals.
    best=0
    for r in $ladder; do
      iv=$(awk -v w="$ladder_workers" -v r="$r" 'BEGIN {printf "%.3fs", w / r}')
      lease=$(awk -v w="$ladder_workers" -v r="$r" 'BEGIN {printf "%.3fs", 3 * w / r}')
      vigil_run "capacity-$r" 1 --api liveness --workers "$ladder_workers" --interval "$iv" --lease "$lease" "${ladder_args[@]}"
      if jq -e '.throughput_per_s >= 0.98 * .offered_per_s and .p99_ms <= 1000' "$out/capacity-$r.json" >/dev/null 2>&1; then
        best=$r
      else
        break
      fi
    done
    if [[ $best == 0 && $quick == 1 ]]; then
      # A busy machine may carry none of the quick ladder's rates within the bar; the quick
      # mode checks the machinery, so the overload runs still get a base rate.
      best=${ladder%% *}
      log "capacity: no rate of the ladder met the bar; quick mode goes on with $best/s"
    fi
    echo "$best" >"$out/capacity.txt"
    log "capacity: $best heartbeats/s" ;;
  overload)
    capacity="${CAPACITY:-$(cat "$out/capacity.txt" 2>/dev/null || true)}"
    if [[ -z $capacity || $capacity == 0 ]]; then
      log "overload: no capacity measured (run the capacity scenario first, or set CAPACITY)"
      continue
    fi
    echo "$capacity" >"$out/capacity.txt"
    iv=$(awk -v w="$overload_workers" -v r="$capacity" 'BEGIN {printf "%.3fs", w / r}')
    lease=$(awk -v w="$overload_workers" -v r="$capacity" 'BEGIN {printf "%.3fs", 3 * w / r}')
    vigil_run overload-giveup 1 --api liveness --workers "$overload_workers" --interval "$iv" --lease "$lease" \
      "${overload_args[@]}"
    vigil_run overload-retry 1 --api liveness --workers "$overload_workers" --interval "$iv" --lease "$lease" \
      "${overload_args[@]}" --retry-resource-exhausted ;;
  fleet)
    vigil_run fleet 0 --api liveness "${fleet_args[@]}" ;;
  memory)
    # Two fleets side by side, each on a server of its own: on vigil's liveness API, and of
    # SDK workers (RecordWorkerHeartbeat). Each takes little of the cores once registered.
    mkdir -p "$out/memory" "$out/memory-sdk"
    log "memory: bench/memory.sh $memory_ns, on the liveness API and as SDK workers, side by side"
    env VIGIL="$root/bin/vigil" OUT="$out/memory" PORT=$((port + 1000)) "${memory_env[@]}" \
      bench/memory.sh $memory_ns >"$out/memory/run.log" 2>&1 &
    liveness_pid=$!
    env VIGIL="$root/bin/vigil" OUT="$out/memory-sdk" PORT=$((port + 1100)) API=public "${memory_env[@]}" \
      bench/memory.sh $memory_ns >"$out/memory-sdk/run.log" 2>&1 || log "memory: bench/memory.sh API=public exited $?"
    wait "$liveness_pid" || log "memory: bench/memory.sh exited $?"
    tail -n 2 "$out/memory/summary.txt" "$out/memory-sdk/summary.txt" 2>/dev/null | sed "s/^/  /" >&2 || true ;;
  postgres)
    if ! command -v pg_isready >/dev/null || ! pg_isready -q -d "$pg_dsn"; then
      log "postgres: no PostgreSQL answers at $pg_dsn; skipped"
      continue
    fi
    for r in $pg_rates; do
      cluster_run "postgres-1-$r" 1 0 --api public --workers "$r" --interval 1s "${pg_args[@]}"
      cluster_run "postgres-3-$r" 3 0 --api public --workers "$r" --interval 1s "${pg_args[@]}"
    done ;;
  cost)
    # The servers alternate, round after round, so that what the shared box's speed does to
    # one round falls on all its servers alike; the ratios are taken round by round.
    if [[ -z ${SKIP_PEER:-} && ! -x bin/temporal-peer ]]; then
      log "cost: stock Temporal's first build takes ten minutes or more (tools/peer/run.sh; SKIP_PEER=1 leaves it out)"
    fi
    for round in $(seq "$cost_rounds"); do
      vigil_run "cost-vigil-$round" 1 --api public "${cost_args[@]}"
      # vigil on PostgreSQL, with PostgreSQL's CPU: only where that CPU can be read.
      if [[ -n $pg_pid ]] && pg_isready -q -d "$pg_dsn" 2>/dev/null; then
        cluster_run "cost-vigil-pg-$round" 1 1 --api public "${cost_args[@]}"
      fi
      floor_run "cost-floor-sqlite-$round" sqlite --api public "${cost_args[@]}"
      floor_run "cost-floor-sqlite-log-$round" sqlite-log --api public "${cost_args[@]}"
      floor_run "cost-floor-$round" none --api public "${cost_args[@]}"
      peer_run "cost-peer-$round" 1 --api public "${cost_args[@]}"
      if [[ -z ${SKIP_PEER:-} && ! -s $out/cost-peer-$round.json ]]; then
        log "cost: stock Temporal did not run (see cost-peer-$round.server.log); the other servers go on without it"
        SKIP_PEER=1
      fi
      # Every heartbeat written: vigil, and both storing floors on the same fleet, whose
      # 30,000 rows no longer fit in SQLite's page cache as the 1 s fleet's 2,000 do.
      vigil_run "cost-vigil-written-$round" 1 --api public "${cost_written_args[@]}"
      floor_run "cost-floor-sqlite-written-$round" sqlite --api public "${cost_written_args[@]}"
      floor_run "cost-floor-sqlite-log-written-$round" sqlite-log --api public "${cost_written_args[@]}"
    done
    go run ./bench/page -results "$out" -print cost | tee "$out/cost.md" >&2 || log "cost: no table" ;;
  *) echo "bench/run.sh: unknown scenario $s" >&2; exit 2 ;;
  esac
done

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
log "raw outputs in $out"
if [[ $page == 1 ]]; then
  go run ./bench/page -results "$out" -page BENCHMARKS.md
  log "BENCHMARKS.md regenerated from $out (git diff BENCHMARKS.md)"
fi
