#!/usr/bin/env bash
while ! grep -q ALLDONE /tmp/s16/run5.log; do sleep 5; done
export NOSAMPLE=1
for r in 1 2; do
  SFLAGS='--dynamic-config-value frontend.earlyRefusalTargetWait="250ms"' /tmp/s16/cap.sh /tmp/s16/vigil-new t250-$r o12000:1.667s:120s
  /tmp/s16/cap.sh /tmp/s16/vigil-new t500-$r o12000:1.667s:120s
done
echo ALLDONE
