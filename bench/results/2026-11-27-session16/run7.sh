#!/usr/bin/env bash
# which of the two lowered goodput at 12,000/s: the sampler (1 Hz /metrics scrape) or the probe
while ! grep -q ALLDONE /tmp/s16/run6.log; do sleep 5; done
/tmp/s16/cap.sh /tmp/s16/vigil-new smp o12000:1.667s:120s
taskset -c 0 nice -n 19 /tmp/s16/probe/probe > /tmp/s16/cap/prb-o12000.probe 2>&1 &
pp=$!
NOSAMPLE=1 /tmp/s16/cap.sh /tmp/s16/vigil-new prb o12000:1.667s:120s
kill $pp
echo ALLDONE
