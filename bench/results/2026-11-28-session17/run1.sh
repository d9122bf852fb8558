#!/usr/bin/env bash
/tmp/s17/fleet100k.sh /tmp/s17/vigil-main main
SFLAGS='--dynamic-config-value system.gcMinExtraBytes=33554432' /tmp/s17/fleet100k.sh /tmp/s17/vigil-main min32
echo ALLDONE
