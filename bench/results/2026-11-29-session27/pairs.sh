#!/usr/bin/env bash
# Capacity and twice it, interleaved: the liveness API, 20,000 workers, lease three intervals,
# 100 s with a 40 s warm-up (session 23's cap.sh), at 12,000/s offered (1.2x; the sweep's
# goodput was flat from 1.2x to 1.6x, so this is the box's capacity) and 20,400/s (2x).
export OUT=${OUT:-/tmp/s27/cap}
bin=${1:-/tmp/s27/exempt}; tag=${2:-ex}
for r in ${ROUNDS:-1 2 3}; do
  ../2026-11-28-session23/cap.sh "$bin" "$tag$r" c12000:1.667s:100s c20400:0.980s:100s
done
