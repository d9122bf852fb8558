#!/usr/bin/env bash
# capp.sh BIN TAG name:interval:duration ...: session 24's capx.sh, one spec at a time, with
# --pprof on the server and a 30 s CPU profile of the measured phase (about 60-90 s into the
# run) saved as $OUT/$tag-$name.cpu.pprof. Since session 26 a wrapper around that session's
# capwith.sh.
cpu() {
  sleep 62; taskset -c 1 curl -s -o "$1.cpu.pprof" "http://127.0.0.1:21243/debug/pprof/profile?seconds=30"
}
export -f cpu
OUT=${OUT:-/tmp/s25/cap} PROBE=cpu exec "$(dirname "$0")/../2026-11-28-session26/capwith.sh" "$@"
