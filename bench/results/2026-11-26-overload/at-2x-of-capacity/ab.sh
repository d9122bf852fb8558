#!/usr/bin/env bash
# ab.sh OUT: the runs recorded here. 20,000 liveness workers at 2.222 s, i.e. 9,000
# heartbeats/s offered, twice the 4,500/s this core carried at p99 <= 1 s (../ladder); lease
# 6.667 s; 100 killed; 40 s warm-up; each run stopped after 150 s (bench/overload-ab.sh's
# defaults).
#   bin/vigil-base: e3c2a09 (before); bin/vigil-er: 8b82be6 (166f37e with the metric renamed)
#   /tmp/er-off.yaml: "frontend.earlyRefusalTargetWait: [{value: 0s}]" (the gate alone)
exec "$(dirname "$0")/../../../overload-ab.sh" "$1" base=/work/main/bin/vigil-base \
  "gate=/work/main/bin/vigil-er --dynamic-config-file /tmp/er-off.yaml" er=/work/main/bin/vigil-er
