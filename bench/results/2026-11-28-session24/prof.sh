#!/usr/bin/env bash
# prof.sh BIN TAG interval duration: session 23's prof.sh (GFLAGS for the generator; KIND=trace
# takes a 4 s runtime trace instead of the 30 s CPU profile), its output in /tmp/s24/prof unless
# OUT says otherwise.
OUT=${OUT:-/tmp/s24/prof} exec "$(dirname "$0")/../2026-11-28-session23/prof.sh" "$@"
