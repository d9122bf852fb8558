#!/usr/bin/env bash
for spec in q1:c6000:3.333s q2:c6000:3.333s q3:o12000:1.667s q4:c6000:3.333s q5:o12000:1.667s; do
  IFS=: read tag name iv <<< "$spec"
  taskset -c 0 nice -n 19 /tmp/s16/probe/probe > /tmp/s16/cap/$tag-$name.probe 2>&1 &
  pp=$!
  /tmp/s16/cap.sh /tmp/s16/vigil $tag $name:$iv:120s
  kill $pp
done
echo ALLDONE
