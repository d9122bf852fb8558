#!/usr/bin/env bash
# The issue's 100,000-worker run (session 23's fleet.sh: liveness API, 30 s interval, 90 s
# lease, 200 s with a 60 s warm-up, 100 killed): `./fleet.sh /tmp/s28/hbwait` (fleet/) and
# `OUT=/tmp/s28/fleetbase ./fleet.sh /tmp/s28/grow` (fleet-base/); later, on the final build,
# `OUT=/tmp/s28/fleetfinal ./fleet.sh /tmp/s28/final` (fleet-final/).
export OUT=${OUT:-/tmp/s28/fleet}
bin=${1:-/tmp/s28/hbwait}
for r in ${ROUNDS:-1}; do ../2026-11-28-session23/fleet.sh "$bin" fleet-$r; done
