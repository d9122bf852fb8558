#!/usr/bin/env bash
/tmp/s17/fleet100k.sh /tmp/s17/vigil-new new
echo ALLDONE
