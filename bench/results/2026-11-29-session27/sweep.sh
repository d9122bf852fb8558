#!/usr/bin/env bash
# Capacity at this sitting's speed: the liveness API (the issue's), 20,000 workers, lease three
# intervals, 100 s with a 40 s warm-up, server on CPU 0 and generator on CPU 1 (session 23's
# cap.sh), at the rates given as name:interval (default 6,000, 8,000 and 10,000/s).
export OUT=${OUT:-/tmp/s27/cap}
bin=${1:-/tmp/s27/main}; tag=${2:-sw}
../2026-11-28-session23/cap.sh "$bin" "$tag" ${SPECS:-c6000:3.333s:100s c8000:2.5s:100s c10000:2s:100s}
