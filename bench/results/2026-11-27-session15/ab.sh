#!/usr/bin/env bash
# interleaved A/B: default target latency vs 600ms
B=/tmp/s15/vigil
run() { # tag name iv dur [sflags]
  SFLAGS="$5" /tmp/s15/cap.sh $B $1 $2:$3:$4
}
TL='--dynamic-config-value history.admissionTargetLatency="600ms"'
run a c5000 4s 120s ""
run b c5000 4s 120s "$TL"
run a c6000 3.333s 120s ""
run b c6000 3.333s 120s "$TL"
run a o7500 2.667s 120s ""
run b o7500 2.667s 120s "$TL"
run a o11000 1.818s 120s ""
run b o11000 1.818s 120s "$TL"
run a2 c6000 3.333s 120s ""
run b2 c6000 3.333s 120s "$TL"
echo ALLDONE
