#!/usr/bin/env bash
/tmp/s17/fleet100k.sh /tmp/s17/vigil-final final
/tmp/s17/mem.sh /tmp/s17/vigil-final final
echo ALLDONE
