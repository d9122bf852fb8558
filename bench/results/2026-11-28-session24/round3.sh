#!/usr/bin/env bash
export OUT=/tmp/s24/cap
H="--dynamic-config-value frontend.earlyRefusalTargetWait=\"5s\" --dynamic-config-value history.admissionMaxQueueDelay=\"9s\""
M="--dynamic-config-value frontend.earlyRefusalTargetWait=\"2s\" --dynamic-config-value history.admissionMaxQueueDelay=\"5s\""
for r in e f; do
GFLAGS=--retry-resource-exhausted SFLAGS="$M" ../2026-11-28-session23/cap.sh /tmp/s24/main mid$r c8000:2.5s:100s
GFLAGS=--retry-resource-exhausted SFLAGS="$H" ../2026-11-28-session23/cap.sh /tmp/s24/main hold$r c8000:2.5s:100s
GFLAGS=--retry-resource-exhausted SFLAGS="" ../2026-11-28-session23/cap.sh /tmp/s24/main def$r c8000:2.5s:100s
done
GFLAGS= SFLAGS="$H" ../2026-11-28-session23/cap.sh /tmp/s24/main giveup-hold c8000:2.5s:100s
GFLAGS= SFLAGS="" ../2026-11-28-session23/cap.sh /tmp/s24/main giveup-def c8000:2.5s:100s
GFLAGS=--retry-resource-exhausted SFLAGS="" ../2026-11-28-session23/cap.sh /tmp/s24/main capdef c4000:5s:100s
