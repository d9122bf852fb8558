#!/usr/bin/env bash
# The issue's 100,000-worker run (session 23's fleet.sh: liveness API, 30 s interval, 90 s
# lease, 200 s with a 60 s warm-up, 100 killed) on this session's build, twice.
export OUT=${OUT:-/tmp/s27/fleet}
bin=${1:-/tmp/s27/exempt}
for r in ${ROUNDS:-1 2}; do ../2026-11-28-session23/fleet.sh "$bin" fleet-$r; done
