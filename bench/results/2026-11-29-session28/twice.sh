#!/usr/bin/env bash
# twice.sh NEW BASE [ROUNDS]: this sitting's capacity and twice it, two builds interleaved
# (session 23's cap.sh: the liveness API, 20,000 workers, lease three intervals, 100 s with a
# 40 s warm-up). On this sitting 12,000/s offered carried 4,100-5,700, so 6,000/s (1.2x) is
# the capacity point and 12,000/s twice it.
export OUT=${OUT:-/tmp/s28/twice}
new=$1; base=$2
for r in ${3:-1}; do
  for spec in c6000:3.333s:100s c12000:1.667s:100s; do
    ../2026-11-28-session23/cap.sh "$new" "new$r" "$spec"
    ../2026-11-28-session23/cap.sh "$base" "base$r" "$spec"
  done
done
