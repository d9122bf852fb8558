#!/usr/bin/env bash
# capp.sh BIN TAG name:interval:duration ...: session 24's capx.sh, one spec at a time, with
# --pprof on the server and a 30 s CPU profile of the measured phase (about 60-90 s into the
# run) saved as $OUT/$tag-$name.cpu.pprof.
set -u
bin=$1; tag=$2; shift 2
out=${OUT:-/tmp/s25/cap}; here=$(dirname "$0")
for spec in "$@"; do
  name=${spec%%:*}
  while ss -ltn | grep -q ":21233 "; do sleep 5; done
  SFLAGS="--pprof ${SFLAGS:-}" "$here/../2026-11-28-session24/capx.sh" "$bin" "$tag" "$spec" &
  run=$!
  ( sleep 62; taskset -c 1 curl -s -o "$out/$tag-$name.cpu.pprof" "http://127.0.0.1:21243/debug/pprof/profile?seconds=30" ) &
  wait $run
done
