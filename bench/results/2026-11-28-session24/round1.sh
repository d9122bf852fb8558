#!/usr/bin/env bash
export OUT=/tmp/s24/cap GFLAGS=--retry-resource-exhausted
H="--dynamic-config-value frontend.earlyRefusalTargetWait=\"5s\" --dynamic-config-value history.admissionMaxQueueDelay=\"9s\""
SFLAGS="" ../2026-11-28-session23/cap.sh /tmp/s24/main def c8000:2.5s:100s
SFLAGS="$H" ../2026-11-28-session23/cap.sh /tmp/s24/main hold c8000:2.5s:100s
