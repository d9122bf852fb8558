#!/usr/bin/env bash
# 2x capacity on the liveness API with the SDK's retries (20,000 workers, 8,000/s offered):
# pat3, whose generator says it retries (vigil-retries-refusals: true) and whose server then
# lets those heartbeats wait, against main (the same generator flags, no header), interleaved.
export OUT=/tmp/s25/cap GFLAGS=--retry-resource-exhausted
for r in ${ROUNDS:-a b c}; do
../2026-11-28-session24/capx.sh /tmp/s25/pat3 lv-pat3$r c8000:2.5s:100s
../2026-11-28-session24/capx.sh /tmp/s25/main lv-main$r c8000:2.5s:100s
done
