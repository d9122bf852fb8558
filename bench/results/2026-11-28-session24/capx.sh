#!/usr/bin/env bash
# capx.sh BIN TAG name:interval:duration ...: session 23's cap.sh with its API and LEASEFLAG
# (the public API: API=public LEASEFLAG=), its output in /tmp/s24/cap unless OUT says otherwise.
OUT=${OUT:-/tmp/s24/cap} exec "$(dirname "$0")/../2026-11-28-session23/cap.sh" "$@"
