#!/usr/bin/env bash
# ab.sh BIN TAGA FLAGSA TAGB FLAGSB [ROUNDS]: session 28's abflags.sh at the rates in SPECS
# (default this sitting's 2x and capacity points): one build under two sets of server flags,
# interleaved (session 23's cap.sh: the liveness API, 20,000 workers, lease three intervals,
# 100 s with a 40 s warm-up).
export OUT=${OUT:-/tmp/s29/ab}
bin=$1 tagA=$2 flagsA=$3 tagB=$4 flagsB=$5
for r in ${6:-1 2}; do
  for spec in ${SPECS:-c12000:1.667s:100s c6000:3.333s:100s}; do
    SFLAGS=$flagsA ../2026-11-28-session23/cap.sh "$bin" "$tagA-$r" "$spec"
    SFLAGS=$flagsB ../2026-11-28-session23/cap.sh "$bin" "$tagB-$r" "$spec"
  done
done
