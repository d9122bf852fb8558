#!/usr/bin/env bash
export OUT=/tmp/s24/cap GFLAGS=--retry-resource-exhausted
H="--dynamic-config-value frontend.earlyRefusalTargetWait=\"5s\" --dynamic-config-value history.admissionMaxQueueDelay=\"9s\""
for r in b c d; do
SFLAGS="$H" ../2026-11-28-session23/cap.sh /tmp/s24/main hold$r c8000:2.5s:100s
SFLAGS="" ../2026-11-28-session23/cap.sh /tmp/s24/main def$r c8000:2.5s:100s
done
