#!/usr/bin/env bash
# capheap.sh BIN TAG name:interval:duration ...: session 24's capx.sh with --pprof on the
# server and heap profiles (inuse, after a GC) at 55 and 80 s into the run, saved as
# $OUT/$tag-$name.hNN.pprof, to see what a waiting call keeps alive.
set -u
bin=$1; tag=$2; shift 2
out=${OUT:-/tmp/s26/cap}; here=$(dirname "$0")
for spec in "$@"; do
  name=${spec%%:*}
  while ss -ltn | grep -q ":21233 "; do sleep 5; done
  SFLAGS="--pprof ${SFLAGS:-}" "$here/../2026-11-28-session24/capx.sh" "$bin" "$tag" "$spec" &
  run=$!
  ( sleep 55; taskset -c 1 curl -s -o "$out/$tag-$name.h55.pprof" "http://127.0.0.1:21243/debug/pprof/heap?gc=1"
    sleep 25; taskset -c 1 curl -s -o "$out/$tag-$name.h80.pprof" "http://127.0.0.1:21243/debug/pprof/heap?gc=1" ) &
  wait $run
done
