#!/usr/bin/env bash
# HEAD (collections 5 s apart; vigil bench printing the first message of each error code)
# three times at twice capacity (as round1.sh), to catch a connection closing mid-run.
export OUT=/tmp/s26/cap API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted
for r in ${ROUNDS:-1 2 3}; do
../2026-11-28-session24/capx.sh /tmp/s26/head pub-head$r c8000:2.5s:100s
done
