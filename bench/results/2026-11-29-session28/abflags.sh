#!/usr/bin/env bash
# abflags.sh BIN TAGA FLAGSA TAGB FLAGSB [ROUNDS]: one build under two sets of server flags,
# interleaved, at 20,400/s and 12,000/s offered (session 23's cap.sh: the liveness API, 20,000
# workers, lease three intervals, 100 s with a 40 s warm-up). This session's runs:
#   OUT=/tmp/s28/target ./abflags.sh /tmp/s28/grow t500 '' t250 \
#     '--dynamic-config-value frontend.earlyRefusalTargetWait="250ms"'
#   OUT=/tmp/s28/patient ./abflags.sh /tmp/s28/grow mqd2 '' mqd0 \
#     '--dynamic-config-value history.admissionMaxQueueDelay="0s"'
export OUT=${OUT:-/tmp/s28/ab}
bin=$1 tagA=$2 flagsA=$3 tagB=$4 flagsB=$5
for r in ${6:-1 2}; do
  for spec in c20400:0.980s:100s c12000:1.667s:100s; do
    SFLAGS=$flagsA ../2026-11-28-session23/cap.sh "$bin" "$tagA-$r" "$spec"
    SFLAGS=$flagsB ../2026-11-28-session23/cap.sh "$bin" "$tagB-$r" "$spec"
  done
done
