#!/usr/bin/env bash
# captrace.sh BIN TAG name:interval:duration ...: capwith.sh with three 4 s execution traces
# (runtime/trace) at 8, 50 and 75 s into the run, saved as $OUT/$tag-$name.tNN.trace, to see
# where a slow run's core goes and how long its goroutines wait for it.
traces() {
  local prev=0
  for at in 8 50 75; do
    sleep $(( at - prev )); prev=$((at + 4))
    taskset -c 1 curl -s -o "$1.t$at.trace" "http://127.0.0.1:21243/debug/pprof/trace?seconds=4"
  done
}
export -f traces
PROBE=traces exec "$(dirname "$0")/capwith.sh" "$@"
