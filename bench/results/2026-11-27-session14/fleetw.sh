#!/usr/bin/env bash
# fleetw.sh BIN NAME: the 100k run with the per-second sampler
bin=$1; name=$2
( sleep 3; spid=$(pgrep -f "$bin server start" | head -1); taskset -c 1 /work/main/bench/results/2026-11-27-session13/sample.sh $spid /tmp/s14/fleet/$name.samples ) &
LOAD="--interval 30s --lease 90s --duration 200s --warmup 60s --kill 100" OUT=/tmp/s14/fleet GEN=/tmp/s14/gen /work/main/bench/results/2026-11-26-session12/fleet/fleet.sh $bin $name
wait
