#!/usr/bin/env bash
for i in 1 2 3; do
  /tmp/s15/cap.sh /tmp/s15/vigil m$i c6000:3.333s:120s
  VIGIL_SQLITE_CACHE_KIB=65536 /tmp/s15/cap.sh /tmp/s15/vigil-cache k$i c6000:3.333s:120s
done
echo ALLDONE
