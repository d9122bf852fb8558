#!/usr/bin/env bash
# usage: cap.sh BIN TAG name:interval:duration ...
# Issue 18's overload runs as session 16's cap.sh made them (20,000 workers, lease three
# intervals, 40 s warm-up; the server pinned to CPU 0 and the generator to CPU 1, GOMAXPROCS=1
# each), with the SQLite WAL read every 2 s on the generator's core ($tag-$name.wal: seconds
# since start, the WAL file's bytes, then the backlog and the length in frames from the
# server's vigil_sqlite_wal_* gauges), to set beside the generator's per-second progress.
# OUT sets the output directory (default /tmp/s21/cap), GEN the generator binary (default
# BIN), SFLAGS extra server flags, WORKERS the fleet (default 20,000).
set -u
bin=$1; tag=$2; shift 2
out=${OUT:-/tmp/s21/cap}; gen=${GEN:-$bin}; mkdir -p "$out"
for spec in "$@"; do
  IFS=: read -r name iv dur <<< "$spec"
  while ss -ltn | grep -q ":21233 "; do sleep 5; done
  dir=$(mktemp -d)
  env GOMAXPROCS=1 taskset -c 0 "$bin" server start --db-filename "$dir/v.db" --port 21233 --http-port 21243 \
    --log-level warn ${SFLAGS:-} > "$out/$tag-$name.server.log" 2>&1 &
  spid=$!; sleep 2
  lease=$(python3 -c "print(f'{3*float(\"$iv\".rstrip(\"s\")):.3f}s')")
  env GOMAXPROCS=1 taskset -c 1 "$gen" bench --api liveness --address 127.0.0.1:21233 --server-pid $spid \
    --metrics-url http://127.0.0.1:21243/metrics --workers ${WORKERS:-20000} --interval "$iv" --lease "$lease" \
    --duration "$dur" --warmup 40s --json "$out/$tag-$name.json" > "$out/$tag-$name.txt" 2> "$out/$tag-$name.progress" &
  gpid=$!
  ( t0=$(date +%s); while kill -0 $gpid 2>/dev/null; do
      echo "$(( $(date +%s) - t0 )) $(stat -c %s "$dir/v.db-wal" 2>/dev/null || echo 0)" \
        "$(curl -s --max-time 1 http://127.0.0.1:21243/metrics | awk '/^vigil_sqlite_wal_(backlog_)?frames/ {printf "%s ", $2}')"
      sleep 2; done ) > "$out/$tag-$name.wal" &
  taskset -pc 1 $! > /dev/null
  wait $gpid
  curl -s http://127.0.0.1:21243/metrics | gzip > "$out/$tag-$name.metrics.gz"
  kill $spid; wait $spid; rm -rf "$dir"
  echo "$tag-$name: $(grep -E '^throughput' "$out/$tag-$name.txt")"
done
