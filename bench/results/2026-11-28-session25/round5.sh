#!/usr/bin/env bash
# The brake's fix (fix: d39ecfe with 692dfd1) at twice capacity, counting live workers
# declared INACTIVE: six runs on the public API with the SDK's retries (as round2's and
# round3's main), then three on the liveness API with the retry header (as round4's pat3).
export OUT=/tmp/s25/cap GFLAGS=--retry-resource-exhausted
for r in 1 2 3 4 5 6; do
API=public LEASEFLAG= ../2026-11-28-session24/capx.sh /tmp/s25/fix pub-fix$r c8000:2.5s:100s
done
for r in 1 2 3; do
../2026-11-28-session24/capx.sh /tmp/s25/fix lv-fix$r c8000:2.5s:100s
done
