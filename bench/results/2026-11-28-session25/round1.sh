#!/usr/bin/env bash
# 2x capacity (8,000/s, 20,000 workers), public API with the SDK's retries: main as shipped
# against main with the adaptive in-flight limit off (history.admissionTargetLatency=0, so the
# limit is history.admissionMaxInFlightPerShard, 32), interleaved.
export OUT=/tmp/s25/cap API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted
T0='--dynamic-config-value history.admissionTargetLatency="0s"'
for r in ${ROUNDS:-a b c}; do
SFLAGS="$T0" ../2026-11-28-session24/capx.sh /tmp/s25/main pub-t0$r c8000:2.5s:100s
SFLAGS= ../2026-11-28-session24/capx.sh /tmp/s25/main pub-main$r c8000:2.5s:100s
done
