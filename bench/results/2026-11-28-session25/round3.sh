#!/usr/bin/env bash
# round2's identical runs with a CPU profile of each measured phase, to compare a slow run's
# profile with a fast one's.
export OUT=/tmp/s25/cap API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted
for r in ${ROUNDS:-1 2 3 4 5}; do
SFLAGS= ./capp.sh /tmp/s25/main pub-prof$r c8000:2.5s:100s
done
