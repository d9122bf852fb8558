#!/usr/bin/env bash
while ! grep -q ALLDONE /tmp/s17/run3.log; do sleep 5; done
/tmp/s17/fleet100k.sh /tmp/s17/vigil-new new3
SFLAGS='--dynamic-config-value system.gcMinExtraBytes=67108864' /tmp/s17/fleet100k.sh /tmp/s17/vigil-new new64
/tmp/s17/fleet100k.sh /tmp/s17/vigil-main main3
echo ALLDONE
