#!/usr/bin/env bash
# ab.sh OUT: the runs recorded here. 20,000 liveness workers at 1.69 s, i.e. 11,830/s offered
# (2x the ladder's fallback figure of 5,916/s); lease 5.07 s; 100 killed; 40 s warm-up; each
# run stopped after 150 s.
#   bin/vigil-base: e3c2a09 (before); bin/vigil-er: 166f37e
#   /tmp/er-off.yaml: "frontend.earlyRefusalTargetWait: [{value: 0s}]" (the gate alone)
INTERVAL=1.69s LEASE=5.07s exec "$(dirname "$0")/../../../overload-ab.sh" "$1" base=/work/main/bin/vigil-base \
  "gate=/work/main/bin/vigil-er --dynamic-config-file /tmp/er-off.yaml" er=/work/main/bin/vigil-er
