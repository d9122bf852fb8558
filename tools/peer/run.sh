#!/usr/bin/env bash
# Build (if needed) and run temporal-peer, a stock Temporal server (go.temporal.io/server
# v1.32.1 via temporaltest) for side-by-side runs against vigil. See docs/peer.md.
#
#   tools/peer/run.sh                  # 127.0.0.1:7234, namespace "default"
#   tools/peer/run.sh --port 7250      # any flag is passed to the peer
#   PEER_REBUILD=1 tools/peer/run.sh   # force a rebuild
#
# The first build downloads and compiles the server's module graph: ten minutes or more
# on two cores. Later builds only relink when tools/peer changed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${PEER_BIN:-$root/bin/temporal-peer}"

needs_build=0
if [[ "${PEER_REBUILD:-0}" == 1 || ! -x "$bin" ]]; then
  needs_build=1
else
  for f in "$here"/*.go "$here"/go.mod "$here"/go.sum; do
    if [[ "$f" -nt "$bin" ]]; then needs_build=1; break; fi
  done
fi

if [[ $needs_build == 1 ]]; then
  echo "building $bin (first build: 10+ minutes)..." >&2
  mkdir -p "$(dirname "$bin")"
  (cd "$here" && go build -o "$bin" .)
fi

exec "$bin" "$@"
