#!/usr/bin/env bash
# The server's garbage collector: main with GOGC=400 and GOMEMLIMIT=1GiB (gc400) against
# main as is, interleaved, at twice capacity (as round1.sh); the generator runs as is.
export OUT=/tmp/s26/cap API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted GEN=/tmp/s26/main
printf '#!/bin/sh\nGOGC=400 GOMEMLIMIT=1GiB exec /tmp/s26/main "$@"\n' > /tmp/s26/gc400
chmod +x /tmp/s26/gc400
for r in ${ROUNDS:-1 2 3}; do
../2026-11-28-session24/capx.sh /tmp/s26/gc400 pub-gc400-$r c8000:2.5s:100s
../2026-11-28-session24/capx.sh /tmp/s26/main pub-gcmain$r c8000:2.5s:100s
done
