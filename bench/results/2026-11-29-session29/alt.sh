#!/usr/bin/env bash
# alt.sh BIN TAG [FACTOR] [BASE:INTERVAL]: capacity and FACTOR times it in one run (vigil
# bench --alternate): the liveness API, 20,000 workers, lease three base intervals, a 40 s
# warm-up, then eight phases of 40 s (base first), the first 10 s of each left out (session
# 23's cap.sh). The JSON's "alternate" gives each phase's goodput and their ratio.
export OUT=${OUT:-/tmp/s29/alternate}
bin=$1 tag=$2 f=${3:-2} spec=${4:-c6000:3.333s}
GFLAGS="--alternate $f --alternate-period 40s ${GFLAGS:-}" ../2026-11-28-session23/cap.sh "$bin" "$tag" "$spec:360s"
