#!/usr/bin/env bash
# Registrations' share (share: history.admissionRegistrationShare=0.25) against main
# (heartbeats always first), interleaved, at twice capacity on the public API with the SDK's
# retries (as session 25's round2.sh).
export OUT=/tmp/s26/cap API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted
for r in ${ROUNDS:-1 2 3}; do  # round 2: ROUNDS="4 5 6"
../2026-11-28-session24/capx.sh /tmp/s26/main pub-main$r c8000:2.5s:100s
../2026-11-28-session24/capx.sh /tmp/s26/share pub-share$r c8000:2.5s:100s
done
