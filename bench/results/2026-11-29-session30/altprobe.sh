#!/usr/bin/env bash
# altprobe.sh BIN TAG [FACTOR] [BASE:INTERVAL]: session 29's alt.sh with the server's --pprof,
# and at the middle of the first three phases (base, high, base again) a 10 s CPU profile and
# a 2 s execution trace, saved as $OUT/$TAG-$NAME.pN.{cpu.pprof,trace} (N the phase).
export OUT=${OUT:-/tmp/s30/alternate}
here=$(cd "$(dirname "$0")" && pwd)
probe() {
  local t0=$SECONDS
  for p in 0 1 2 4; do
    local at=$((48 + 20 * p))
    while ((SECONDS - t0 < at)); do sleep 0.2; done
    taskset -c 1 curl -s -o "$1.p$p.cpu.pprof" "http://127.0.0.1:21243/debug/pprof/profile?seconds=10" &
    sleep 3
    taskset -c 1 curl -s -o "$1.p$p.trace" "http://127.0.0.1:21243/debug/pprof/trace?seconds=2"
    wait
  done
}
export -f probe
bin=$1 tag=$2 f=${3:-2} spec=${4:-c10000:2s}
GFLAGS="--alternate $f --alternate-period ${PERIOD:-20s} --alternate-settle ${SETTLE:-5s} ${GFLAGS:-}" \
  PROBE=probe OUT=$OUT "$here/../2026-11-28-session26/capwith.sh" "$bin" "$tag" "$spec:${DUR:-360s}"
