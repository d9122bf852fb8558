#!/usr/bin/env bash
# sdk.sh BIN TAG name:interval ...: an SDK-like fleet (the public API, refusals retried as the Go
# SDK does, with its client-name header) of 20,000 workers, pinned (server CPU 0, generator
# CPU 1), 200 s with 40 s of warm-up, 100 workers killed halfway; lease three intervals (the
# server's choice). $tag-$name.sec samples the server every second as cap.sh does.
set -u
bin=$1; tag=$2; shift 2
out=${OUT:-/tmp/s24/sdk}; gen=${GEN:-$bin}; mkdir -p "$out"
for spec in "$@"; do
  IFS=: read -r name iv <<< "$spec"
  while ss -ltn | grep -q ":21233 "; do sleep 5; done
  dir=$(mktemp -d)
  env GOMAXPROCS=1 taskset -c 0 "$bin" server start --db-filename "$dir/v.db" --port 21233 --http-port 21243 \
    --log-level warn ${SFLAGS:-} > "$out/$tag-$name.server.log" 2>&1 &
  spid=$!; sleep 2
  env GOMAXPROCS=1 taskset -c 1 "$gen" bench --api public --retry-resource-exhausted --address 127.0.0.1:21233 --server-pid $spid \
    --metrics-url http://127.0.0.1:21243/metrics --workers ${WORKERS:-20000} --interval "$iv" \
    --duration 200s --warmup 40s --kill 100 --recovery-timeout 90s --json "$out/$tag-$name.json" > "$out/$tag-$name.txt" 2> "$out/$tag-$name.progress" &
  gpid=$!
  ( t0=$(date +%s.%N); while kill -0 $gpid 2>/dev/null; do
      now=$(date +%s.%N)
      echo "$(python3 -c "print(round($now-$t0,1))") $(awk '{print $14+$15}' /proc/$spid/stat)" \
        "$(curl -s --max-time 1 http://127.0.0.1:21243/metrics | awk '
          /^vigil_worker_heartbeats_total/ {hb+=$2} /^vigil_early_refusals_total/ {er=$2}
          /^vigil_admission_shed_total/ {sh+=$2} /^vigil_admission_dropped_total/ {dr+=$2}
          /^vigil_heartbeats_outstanding / {os=$2} /^vigil_admission_queued / {q=$2}
          /^vigil_admission_in_flight_limit / {l=$2} /^vigil_early_refusals_retried_total/ {rt=$2}
          /^vigil_worker_expiry_brake_engaged\{.*server-behind/ {br=$2}
          END {printf "hb %d er %d sh %d dr %d os %d q %d lim %d retried %d brake %d", hb, er, sh, dr, os, q, l, rt, br}')"
      sleep 1; done ) > "$out/$tag-$name.sec" &
  taskset -pc 1 $! > /dev/null
  wait $gpid
  curl -s http://127.0.0.1:21243/metrics | gzip > "$out/$tag-$name.metrics.gz"
  kill $spid; wait $spid; rm -rf "$dir"
  echo "$tag-$name: $(grep -E '^throughput' "$out/$tag-$name.txt")"
done
