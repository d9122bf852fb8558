#!/usr/bin/env bash
# captrace.sh BIN TAG name:interval:duration ...: session 24's capx.sh with --pprof on the
# server and three 4 s execution traces (runtime/trace) at 8, 50 and 75 s into the run,
# saved as $OUT/$tag-$name.tNN.trace, to see where a slow run's core goes and how long its
# goroutines wait for it.
set -u
bin=$1; tag=$2; shift 2
out=${OUT:-/tmp/s26/cap}; here=$(dirname "$0")
for spec in "$@"; do
  name=${spec%%:*}
  while ss -ltn | grep -q ":21233 "; do sleep 5; done
  SFLAGS="--pprof ${SFLAGS:-}" "$here/../2026-11-28-session24/capx.sh" "$bin" "$tag" "$spec" &
  run=$!
  ( for at in 8 50 75; do
      sleep $(( at - ${prev:-0} )); prev=$((at + 4))
      taskset -c 1 curl -s -o "$out/$tag-$name.t$at.trace" "http://127.0.0.1:21243/debug/pprof/trace?seconds=4"
    done ) &
  wait $run
done
