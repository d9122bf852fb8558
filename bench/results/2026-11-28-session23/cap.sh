#!/usr/bin/env bash
# cap.sh BIN TAG name:interval:duration ...: session 22's cap.sh (20,000 workers pinned, lease
# three intervals, 40 s warm-up, the server sampled every second into $tag-$name.sec: seconds,
# server CPU ticks, then the metrics below in the order of the sampler's awk), with GFLAGS
# passed to the generator (session 23: --retry-resource-exhausted, the SDK's retries). API
# (default liveness) and LEASEFLAG (default --lease of three intervals; empty for the public
# API, whose lease is the server's choice) were added in session 25, for session 24's capx.sh.
set -u
bin=$1; tag=$2; shift 2
out=${OUT:-/tmp/s23/cap}; gen=${GEN:-$bin}; mkdir -p "$out"
for spec in "$@"; do
  IFS=: read -r name iv dur <<< "$spec"
  while ss -ltn | grep -q ":21233 "; do sleep 5; done
  dir=$(mktemp -d)
  env GOMAXPROCS=1 taskset -c 0 "$bin" server start --db-filename "$dir/v.db" --port 21233 --http-port 21243 \
    --log-level warn ${SFLAGS:-} > "$out/$tag-$name.server.log" 2>&1 &
  spid=$!; sleep 2
  lease=$(python3 -c "print(f'{3*float(\"$iv\".rstrip(\"s\")):.3f}s')")
  env GOMAXPROCS=1 taskset -c 1 "$gen" bench --api ${API:-liveness} --address 127.0.0.1:21233 --server-pid $spid \
    --metrics-url http://127.0.0.1:21243/metrics --workers ${WORKERS:-20000} --interval "$iv" ${LEASEFLAG---lease $lease} \
    --duration "$dur" --warmup 40s ${GFLAGS:-} --json "$out/$tag-$name.json" > "$out/$tag-$name.txt" 2> "$out/$tag-$name.progress" &
  gpid=$!
  ( t0=$(date +%s.%N); while kill -0 $gpid 2>/dev/null; do
      now=$(date +%s.%N)
      echo "$(python3 -c "print(round($now-$t0,1))") $(awk '{print $14+$15}' /proc/$spid/stat)" \
        "$(curl -s --max-time 1 http://127.0.0.1:21243/metrics | awk '
          /^vigil_worker_heartbeats_total/ {hb+=$2} /^vigil_early_refusals_total/ {er=$2}
          /^vigil_admission_shed_total/ {sh+=$2} /^vigil_admission_dropped_total/ {dr+=$2}
          /^vigil_heartbeats_outstanding / {os=$2} /^vigil_admission_queued / {q=$2}
          /^vigil_admission_in_flight_limit / {l=$2} /^go_gc_duration_seconds_count/ {gc=$2}
          /^go_memstats_heap_inuse_bytes/ {hi=$2} /^vigil_group_commit_batch_size_count/ {gcb+=$2}
          END {printf "hb %d er %d sh %d dr %d os %d q %d lim %d gc %d heapMiB %d commits %d", hb, er, sh, dr, os, q, l, gc, hi/1048576, gcb}')"
      sleep 1; done ) > "$out/$tag-$name.sec" &
  taskset -pc 1 $! > /dev/null
  wait $gpid
  curl -s http://127.0.0.1:21243/metrics | gzip > "$out/$tag-$name.metrics.gz"
  kill $spid; wait $spid; rm -rf "$dir"
  echo "$tag-$name: $(grep -E '^throughput' "$out/$tag-$name.txt")"
done
