#!/usr/bin/env bash
# capheap.sh BIN TAG name:interval:duration ...: capwith.sh with heap profiles (in use, after a
# collection) at 55 and 80 s into the run, saved as $OUT/$tag-$name.hNN.pprof, to see what a
# waiting call keeps alive.
heaps() {
  sleep 55; taskset -c 1 curl -s -o "$1.h55.pprof" "http://127.0.0.1:21243/debug/pprof/heap?gc=1"
  sleep 25; taskset -c 1 curl -s -o "$1.h80.pprof" "http://127.0.0.1:21243/debug/pprof/heap?gc=1"
}
export -f heaps
PROBE=heaps exec "$(dirname "$0")/capwith.sh" "$@"
