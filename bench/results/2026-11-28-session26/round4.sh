#!/usr/bin/env bash
# The collector's pacing: collections 5 s apart (system.gcTargetInterval, at most
# system.gcMaxExtraBytes, 512 MiB, above the live heap) against the default 2 s, interleaved,
# at twice capacity (as round1.sh).
export OUT=/tmp/s26/cap API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted
for r in ${ROUNDS:-1 2 3}; do
SFLAGS='--dynamic-config-value system.gcTargetInterval="5s"' ../2026-11-28-session24/capx.sh /tmp/s26/main pub-gc5s-$r c8000:2.5s:100s
SFLAGS= ../2026-11-28-session24/capx.sh /tmp/s26/main pub-gc2s-$r c8000:2.5s:100s
done
