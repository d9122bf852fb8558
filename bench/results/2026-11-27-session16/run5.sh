#!/usr/bin/env bash
# capacity sweep and 2x with the new build, no sampler, no probe
while ! grep -q ALLDONE /tmp/s16/run4.log; do sleep 5; done
export NOSAMPLE=1
/tmp/s16/cap.sh /tmp/s16/vigil-new s1 c8000:2.5s:120s c10000:2.0s:120s o16000:1.25s:120s c9000:2.222s:120s o18000:1.111s:120s
echo ALLDONE
