#!/usr/bin/env bash
for i in 1 2 3 4; do
  taskset -c 0 nice -n 19 /tmp/s15/probe/probe > /tmp/s15/cap/p$i-c6000.probe 2>&1 &
  pp=$!
  /tmp/s15/cap.sh /tmp/s15/vigil p$i c6000:3.333s:120s
  kill $pp
done
echo ALLDONE
