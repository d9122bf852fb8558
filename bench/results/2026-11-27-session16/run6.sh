#!/usr/bin/env bash
while ! grep -q ALLDONE /tmp/s16/run5b.log; do sleep 5; done
/tmp/s16/fleet100k.sh /tmp/s16/vigil main
/tmp/s16/fleet100k.sh /tmp/s16/vigil-new new
echo ALLDONE
