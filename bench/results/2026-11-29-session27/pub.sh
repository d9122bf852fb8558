#!/usr/bin/env bash
# The public API with the SDK's retries (session 26's round4.sh settings: API=public, the lease
# the server's choice, --retry-resource-exhausted), 20,000 workers, 100 s with a 40 s warm-up,
# at the rates in SPECS (default: a sweep at 8,000, 10,000 and 12,000/s).
export OUT=${OUT:-/tmp/s27/pub} API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted
exec ../2026-11-28-session23/cap.sh "${1:-/tmp/s27/exempt}" "${2:-pub}" ${SPECS:-c8000:2.5s:100s c10000:2s:100s c12000:1.667s:100s}
