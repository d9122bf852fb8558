#!/usr/bin/env bash
# bench/cost.sh: the server's CPU time per heartbeat, side by side in the same minutes. It runs
# the cost scenario of bench/run.sh alone: vigil (SQLite, a fresh database each run), vigil on
# the local PostgreSQL (a fresh schema; PostgreSQL's processes' CPU added to vigil's), the
# gRPC + SQLite group-commit floors (upsert, and append-only log) and the gRPC floor
# (tools/floor), and stock Temporal (tools/peer), one after the other, round after round, each
# server pinned to CPU 0 with GOMAXPROCS 1 and `vigil bench` to CPU 1: 2,000 SDK-style workers
# heartbeating every second, the server's utime+stime over a steady 16 s window divided by the
# heartbeats answered OK in it. Then vigil and both storing floors again at the same rate from
# 30,000 workers every 15 s, where vigil writes every heartbeat (as at the SDK's default
# interval) instead of about one in ten.
#
#   bench/cost.sh                 # three rounds, then BENCHMARKS.md's cost table regenerated
#   COST_ROUNDS=5 bench/cost.sh   # more rounds
#   bench/cost.sh --no-page       # results only, BENCHMARKS.md untouched
#   bench/cost.sh --quick         # one small round, to check the machinery
#   SKIP_PEER=1 bench/cost.sh     # without stock Temporal (its first build takes 10+ minutes)
#
# It prints each server's median and range of CPU per heartbeat and latency, and the ratios of
# vigil's CPU per heartbeat over each other server's, round by round; the raw outputs (each
# run's JSON, table, progress and server log, and cost.md) go under bench-results/<UTC time>/.
set -euo pipefail
case ${1:-} in
-h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
SCENARIOS=cost exec "$(dirname "${BASH_SOURCE[0]}")/run.sh" "$@"
