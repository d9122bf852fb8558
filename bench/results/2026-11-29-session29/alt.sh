#!/usr/bin/env bash
# alt.sh BIN TAG [FACTOR] [BASE:INTERVAL]: capacity and FACTOR times it in one run (vigil
# bench --alternate): the liveness API, 20,000 workers, lease three base intervals, a 40 s
# warm-up, then sixteen phases of PERIOD (20 s; base first), the first SETTLE (5 s) of each
# left out (session 23's cap.sh). The JSON's "alternate" gives each phase's goodput and their
# ratio. The first runs (a1, a2) used eight phases of 40 s, the first 10 s left out: the box's
# speed moved from phase to phase by more than the ratio, so shorter phases, more of them.
export OUT=${OUT:-/tmp/s29/alternate}
bin=$1 tag=$2 f=${3:-2} spec=${4:-c6000:3.333s}
GFLAGS="--alternate $f --alternate-period ${PERIOD:-20s} --alternate-settle ${SETTLE:-5s} ${GFLAGS:-}" ../2026-11-28-session23/cap.sh "$bin" "$tag" "$spec:360s"
