#!/usr/bin/env bash
# 2x without the sampler or the probe: main against new, interleaved
export NOSAMPLE=1
for r in 1 2; do
  /tmp/s16/cap.sh /tmp/s16/vigil m$r o12000:1.667s:120s
  /tmp/s16/cap.sh /tmp/s16/vigil-new n$r o12000:1.667s:120s
done
echo ALLDONE
