#!/usr/bin/env bash
# profab.sh NAME:INTERVAL TAG=BIN ...: one pinned cap.sh run per build (in the order given),
# each with a 30 s CPU profile of the server from 85 s on ($OUT/$TAG-$NAME.cpu), to compare
# where the builds spend the core at the same load.
set -u
IFS=: read -r name iv <<< "$1"; shift
out=${OUT:-/tmp/s21/cap}; here=$(cd "$(dirname "$0")" && pwd)
for pair in "$@"; do
  tag=${pair%%=*}; bin=${pair#*=}
  SFLAGS=--pprof "$here/cap.sh" "$bin" "$tag" "$name:$iv:120s" &
  run=$!
  sleep 85
  taskset -c 1 curl -s -o "$out/$tag-$name.cpu" "http://127.0.0.1:21243/debug/pprof/profile?seconds=30"
  wait $run
done
