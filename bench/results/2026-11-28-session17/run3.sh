#!/usr/bin/env bash
/tmp/s17/fleet100k.sh /tmp/s17/vigil-new new2
/tmp/s17/fleet100k.sh /tmp/s17/vigil-main main2
/tmp/s17/mem.sh /tmp/s17/vigil-new new2
echo ALLDONE
