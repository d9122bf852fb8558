#!/usr/bin/env bash
# capwith.sh BIN TAG name:interval:duration ...: session 24's capx.sh, one spec at a time, with
# --pprof on the server and $PROBE run beside it as `$PROBE PREFIX`, where PREFIX is
# $OUT/$tag-$name: the probe saves what it takes from http://127.0.0.1:21243/debug/pprof/
# under that prefix. PROBE is a command, or a bash function exported with `export -f`
# (captrace.sh, capheap.sh, session 25's capp.sh).
set -u
bin=$1; tag=$2; shift 2
out=${OUT:-/tmp/s26/cap}; here=$(dirname "$0")
for spec in "$@"; do
  name=${spec%%:*}
  while ss -ltn | grep -q ":21233 "; do sleep 5; done
  SFLAGS="--pprof ${SFLAGS:-}" OUT=$out "$here/../2026-11-28-session24/capx.sh" "$bin" "$tag" "$spec" &
  run=$!
  "$PROBE" "$out/$tag-$name" &
  wait $run
done
