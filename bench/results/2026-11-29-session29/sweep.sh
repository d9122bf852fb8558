#!/usr/bin/env bash
# sweep.sh BIN TAG SPEC...: this sitting's capacity (session 23's cap.sh: the liveness API,
# 20,000 workers, lease three intervals, 100 s with a 40 s warm-up), one run per rate.
export OUT=${OUT:-/tmp/s29/cap}
bin=$1 tag=$2; shift 2
../2026-11-28-session23/cap.sh "$bin" "$tag" "${@:-c6000:3.333s:100s c9000:2.222s:100s c12000:1.667s:100s}"
