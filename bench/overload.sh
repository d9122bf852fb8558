#!/usr/bin/env bash
# Runs issue 18's overload benchmarks unattended, each on a fresh server (new SQLite database),
# one server at a time, and prints a summary (also written to OUT/summary.md):
#
#   1. capacity: a ladder of offered heartbeat rates (RATES) by a fleet of OVERLOAD_WORKERS
#      liveness workers; the box's capacity is the highest rate carried at >= 98 % with
#      p99 <= 1 s. Skipped when CAPACITY is given.
#   2. overload: OVERLOAD_FACTORS (default 2) times that capacity offered by the same fleet
#      (interval = workers / rate, lease = 3 intervals), with KILL workers killed mid-run:
#      goodput (ok/s, and as a share of capacity), p99, false INACTIVE, detection, RSS.
#   3. fleet: the issue's 100,000-worker run (30 s interval, 90 s lease, 200 s with a 60 s
#      warm-up, 100 killed).
#
#   bench/overload.sh [OUT]                      # all three (about 25 minutes)
#   RUNS="overload" CAPACITY=4000 bench/overload.sh
#   RATES="1000 2000 4000 6000" bench/overload.sh
#   FLEET_WORKERS=50000 RUNS=fleet bench/overload.sh
#   FLEET_ARGS="--interval 15s --lease 45s --duration 120s --warmup 30s" RUNS=fleet bench/overload.sh
#   PIN=1 OVERLOAD_FACTORS="1.4 2" bench/overload.sh
#
# With KILL, vigil bench keeps the load on until every killed worker is seen INACTIVE; while
# the server is behind the whole time the expiry brake holds them, so an overload run is
# interrupted (SIGINT: the summary is still written) KILL_WAIT seconds (default 60) after its
# planned end.
#
# PIN=1 runs the server on CPU SERVER_CPU (default 0) and the generator on GEN_CPU (default 1),
# each with GOMAXPROCS=1 (taskset): capacity is then what the server alone carries on its core,
# and an overload run does not take CPU from the server by the generator working harder. BIN
# uses a vigil binary already built (e.g. another commit's) instead of building this tree.
#
# False INACTIVE is what the server itself counts as the load ends (vigil bench reads
# --metrics-url then, before its shutdowns): vigil_worker_resurrections_total (a worker
# declared INACTIVE that heartbeats again) and lease expiries beyond the killed workers
# (vigil_worker_lease_expiries_total − killed). At 100,000 workers the generator's shutdowns
# take longer than a lease minus an interval, so the count at the very end would include
# workers that stopped beating while waiting for their ShutdownWorker. Ports: PORT (default 21233) and PORT+10 for HTTP.
#
# The generator shares the machine with the server: read its CPU beside the server's in each
# run's .txt. On a shared or small machine every figure is pessimistic; say so.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${1:-bench-results/overload-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"
runs="${RUNS:-capacity overload fleet}"
rates="${RATES:-1000 2000 3000 4000 6000 8000}"
ow="${OVERLOAD_WORKERS:-20000}"
fw="${FLEET_WORKERS:-100000}"
fleet_args="${FLEET_ARGS:---interval 30s --lease 90s --duration 200s --warmup 60s}"
kill_n="${KILL:-100}"
kill_wait="${KILL_WAIT:-60}"
step_duration="${STEP_DURATION:-60}"
overload_duration="${OVERLOAD_DURATION:-120}"
port="${PORT:-21233}"
http=$((port + 10))
capacity="${CAPACITY:-}"

bin="${BIN:-bin/vigil}"
if [[ -z ${BIN:-} ]]; then go build -o bin/vigil ./cmd/vigil; fi
pin="${PIN:-}"
server_cmd=("$bin") gen_cmd=("$bin")
if [[ -n $pin ]]; then
  server_cmd=(env GOMAXPROCS=1 taskset -c "${SERVER_CPU:-0}" "$bin")
  gen_cmd=(env GOMAXPROCS=1 taskset -c "${GEN_CPU:-1}" "$bin")
fi
factors="${OVERLOAD_FACTORS:-2}"
{
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with local changes)')"
  echo "machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(uname -sr)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "binary: $bin; pinned: ${pin:+server on CPU ${SERVER_CPU:-0}, generator on CPU ${GEN_CPU:-1}, GOMAXPROCS=1 each}${pin:-no}"
  echo "started: $(date -u +%FT%TZ)"
} >"$out/machine.txt"

wait_port() { # host port seconds
  for _ in $(seq $(($3 * 10))); do
    if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on $1:$2" >&2
  return 1
}

metric() { # file name: the value of an unlabelled series, 0 if absent
  awk -v n="$2" '$1 == n {printf "%d\n", $2; f=1} END {if (!f) print 0}' "$1"
}

# run NAME BENCH_ARGS...: a fresh vigil for one `vigil bench --api liveness` run; leaves
# OUT/NAME.json (the generator's summary), NAME.metrics (the server's at the end) and NAME.txt.
run() {
  local name=$1; shift
  local dir; dir=$(mktemp -d)
  "${server_cmd[@]}" server start --db-filename "$dir/v.db" --port "$port" --http-port "$http" \
    --log-level warn >"$out/$name.server.log" 2>&1 &
  local pid=$!
  wait_port 127.0.0.1 "$port" 60
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "$name: the server did not start (is port $port taken?); see $out/$name.server.log" >&2
    exit 1
  fi
  echo "== $name: vigil bench --api liveness $* (load average $(cut -d' ' -f1 /proc/loadavg))" >&2
  local limit=()
  if [[ ${run_timeout:-0} -gt 0 ]]; then limit=(timeout -s INT "$run_timeout"); fi
  "${limit[@]}" "${gen_cmd[@]}" bench --api liveness --address "127.0.0.1:$port" --server-pid "$pid" \
    --metrics-url "http://127.0.0.1:$http/metrics" --json "$out/$name.json" "$@" \
    >"$out/$name.txt" 2>"$out/$name.progress" || true
  echo "$name: load average at end $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
  curl -sf "http://127.0.0.1:$http/metrics" >"$out/$name.metrics" || true
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
  sed -n '/^offered/,/^generator/p' "$out/$name.txt" >&2
}

# row NAME WORKERS: one summary row from NAME.json and NAME.metrics.
row() {
  local name=$1 workers=$2 j="$out/$1.json" m="$out/$1.metrics"
  [[ -s $j ]] || { echo "| $name | (no result) |||||||||||"; return; }
  local expiries=0 resurrections=0
  if jq -e '.server_at_load_end' "$j" >/dev/null 2>&1; then
    # As the load ended, before the generator's shutdowns: a worker still waiting for its
    # ShutdownWorker when its lease runs out would count, and says nothing about the run.
    expiries=$(jq -r '.server_at_load_end.worker_lease_expiries | floor' "$j")
    resurrections=$(jq -r '.server_at_load_end.worker_resurrections | floor' "$j")
  elif [[ -s $m ]]; then
    expiries=$(metric "$m" vigil_worker_lease_expiries_total)
    resurrections=$(metric "$m" vigil_worker_resurrections_total)
  fi
  jq -r --arg name "$name" --argjson w "$workers" --argjson cap "${capacity:-0}" \
    --argjson exp "$expiries" --argjson res "$resurrections" '
    def r(x): if x == null then "–" else (x * 10 | round / 10 | tostring) end;
    (.kill.killed // 0) as $k |
    "| \($name) | \(r(.offered_per_s)) | \(r(.throughput_per_s)) | " +
    (if $cap > 0 then "\(r(100 * .throughput_per_s / $cap)) %" else "–" end) +
    " | \(r(.p99_ms)) | \(.errors) | \($res) | \([$exp - $k, 0] | max) (\($exp) expiries, \($k) killed) | " +
    (if .kill then "\(.kill.detected)/\(.kill.killed), p99 \(r(.kill.detection_p99_ms / 1000)) s, max \(r(.kill.detection_max_ms / 1000)) s" else "–" end) +
    " | \(r(.server.max_rss_mib)) MiB | \(r(.server.max_rss_mib * 1024 / $w)) KB | \(r(.server.mean_cpu_pct)) % |"' "$j"
}

header='| run | offered/s | ok/s | of capacity | p99 ms | errors | resurrections | false INACTIVE | killed detected | server RSS | per worker | server CPU |
|---|---|---|---|---|---|---|---|---|---|---|---|'
rows=()

capacity_note=""
if [[ " $runs " == *" capacity "* && -z $capacity ]]; then
  best=0
  capacity_note=" (every rate of RATES was carried: capacity is at least this; extend RATES)"
  for r in $rates; do
    interval=$(awk -v w="$ow" -v r="$r" 'BEGIN {printf "%.3f", w / r}')
    warmup=$(awk -v i="$interval" 'BEGIN {w = 2 * i; if (w < 15) w = 15; printf "%d", w}')
    run "capacity-$r" --workers "$ow" --interval "${interval}s" --lease "$(awk -v i="$interval" 'BEGIN {printf "%.3f", 3 * i}')s" \
      --duration "$((step_duration + warmup))s" --warmup "${warmup}s"
    rows+=("$(row "capacity-$r" "$ow")")
    ok=$(jq -r '.throughput_per_s // 0' "$out/capacity-$r.json" 2>/dev/null || echo 0)
    good=$(jq -r 'if (.throughput_per_s // 0) >= 0.98 * .offered_per_s and .p99_ms <= 1000 then 1 else 0 end' \
      "$out/capacity-$r.json" 2>/dev/null || echo 0)
    if [[ $good == 1 ]]; then
      best=$(awk -v a="$best" -v b="$ok" 'BEGIN {print (b > a ? b : a)}')
    else
      capacity_note=""
      break # past capacity: the next, higher rates would only repeat it
    fi
  done
  capacity=${best%.*}
  if [[ ${capacity:-0} -le 0 ]]; then
    capacity=$(jq -r '.throughput_per_s | floor' "$out/capacity-${rates%% *}.json" 2>/dev/null || echo 0)
  fi
  echo "capacity: $capacity heartbeats/s$capacity_note" | tee -a "$out/machine.txt" >&2
fi

if [[ " $runs " == *" overload "* ]]; then
  if [[ -z $capacity || $capacity -le 0 ]]; then
    echo "overload: no capacity measured; set CAPACITY or include the capacity run" >&2
  else
    for f in $factors; do
      rate=$(awk -v c="$capacity" -v f="$f" 'BEGIN {printf "%d", c * f}')
      interval=$(awk -v w="$ow" -v r="$rate" 'BEGIN {printf "%.3f", w / r}')
      warmup=$(awk -v i="$interval" 'BEGIN {w = 2 * i; if (w < 15) w = 15; printf "%d", w}')
      run_timeout=$((overload_duration + warmup + kill_wait)) run "overload-${f}x" --workers "$ow" --interval "${interval}s" --lease "$(awk -v i="$interval" 'BEGIN {printf "%.3f", 3 * i}')s" \
        --duration "$((overload_duration + warmup))s" --warmup "${warmup}s" --kill "$kill_n"
      rows+=("$(row "overload-${f}x" "$ow")")
    done
  fi
fi

if [[ " $runs " == *" fleet "* ]]; then
  # shellcheck disable=SC2086
  run_timeout=${FLEET_TIMEOUT:-0} run fleet --workers "$fw" $fleet_args --kill "$kill_n"
  rows+=("$(row fleet "$fw")")
fi

echo "finished: $(date -u +%FT%TZ)" >>"$out/machine.txt"
{
  cat "$out/machine.txt"
  echo
  echo "capacity: ${capacity:-not measured} heartbeats/s$capacity_note ($ow workers; >= 98 % carried with p99 <= 1 s)"
  echo
  echo "$header"
  printf '%s\n' "${rows[@]}"
} | tee "$out/summary.md"
