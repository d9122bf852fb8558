#!/usr/bin/env bash
# table.sh OUT: every row of issue 19's table in one sitting, on the checked-out code, one server
# at a time (server and generator unpinned, as the rows were measured before).
#   rows 1, 2 (churn 50, 20), 5 (public API rates, with the Temporal peer), 6 (the burst, with
#   the peer), 7 (recovery): bench/scenarios.sh
#   row 3 (the largest fleet at a 10 s interval): vigil bench --api public, 100 s, 40 s warm-up
#   row 6 (memory per idle worker at 100,000): bench/memory.sh, stopped once the fleet is registered
set -uo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd); out=$(realpath -m "$1"); mkdir -p "$out"/scen "$out"/scale "$out"/mem
cd "$root"
log() { echo "$(date -u +%T) $*" | tee -a "$out/table.log"; }

log "scenarios 1 3 4 5"
SCENARIOS="1 3 4 5" CHURNS="50 20" RATES="4000 6000 8000 10000" DURATION=60s \
  bench/scenarios.sh "$out/scen" > "$out/scen.log" 2>&1
log "scenarios done"

log "scale 30000 50000 100000"
OUT="$out/scale" "$root/bench/results/2026-11-28-session20/scale.sh" 30000 50000 100000 | tee -a "$out/table.log"

log "memory 100000"
( VIGIL=$root/bin/vigil OUT=$out/mem INTERVAL=120s LEASE=180s STEADY=1 SETTLE=30s \
  setsid bench/memory.sh 100000 > "$out/mem/run.log" 2>&1 ) &
while ! grep -q "registered RSS" "$out/mem/run.log" 2>/dev/null; do sleep 5; done
sleep 2
pkill -f "bench/memory.sh 100000"; pkill -f "port 22233"; sleep 3; pkill -9 -f 22233
log "memory: $(grep 'registered RSS' "$out/mem/run.log")"
log "done"
