#!/usr/bin/env bash
# The same run four times (main, 2x, public API with the SDK's retries) beside canary.go on
# both cores, to see whether the spread between identical runs follows the box's speed.
export OUT=/tmp/s25/cap API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted
for r in ${ROUNDS:-1 2 3 4}; do
SFLAGS= ../2026-11-28-session24/capx.sh /tmp/s25/main pub-same$r c8000:2.5s:100s
done
