#!/usr/bin/env bash
# profpair.sh NEW BASE [ROUNDS]: capacity (12,000/s offered) and twice it (20,400/s), the
# liveness API, 20,000 workers, lease three intervals, each with a 30 s CPU profile of the
# measured phase (session 25's capp.sh), the two builds interleaved.
export OUT=${OUT:-/tmp/s28/prof}
new=$1; base=$2
for r in ${3:-1}; do
  ../2026-11-28-session25/capp.sh "$new" "new$r" c12000:1.667s:100s
  ../2026-11-28-session25/capp.sh "$base" "base$r" c12000:1.667s:100s
  ../2026-11-28-session25/capp.sh "$new" "new$r" c20400:0.980s:100s
  ../2026-11-28-session25/capp.sh "$base" "base$r" c20400:0.980s:100s
done
