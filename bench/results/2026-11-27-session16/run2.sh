#!/usr/bin/env bash
# A/B of the rate wait at a moderate rate (20,000 workers, 30 s interval: 667/s)
for r in 1 2; do
  /tmp/s16/cap.sh /tmp/s16/vigil main-$r slow:30s:90s
  /tmp/s16/cap.sh /tmp/s16/vigil-new new-$r slow:30s:90s
done
echo ALLDONE
