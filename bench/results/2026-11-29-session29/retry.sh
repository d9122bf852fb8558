#!/usr/bin/env bash
# retry.sh BIN [ROUNDS]: capacity and twice it for the two kinds of liveness API caller,
# interleaved (session 23's cap.sh: 20,000 workers, lease three intervals, 100 s with a 40 s
# warm-up): callers that give up on a refusal (open) and callers that retry it within their
# deadline and say so with the vigil-retries-refusals header (retry; the Go SDK's behaviour).
# On this sitting 6,000/s offered is the capacity point (1.1-1.2x) and 12,000/s twice it.
export OUT=${OUT:-/tmp/s29/retry}
bin=$1
for r in ${2:-1 2}; do
  for spec in c6000:3.333s:100s c12000:1.667s:100s; do
    ../2026-11-28-session23/cap.sh "$bin" "open$r" "$spec"
    GFLAGS=--retry-resource-exhausted ../2026-11-28-session23/cap.sh "$bin" "retry$r" "$spec"
  done
done
