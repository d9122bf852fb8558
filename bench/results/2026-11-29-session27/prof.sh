#!/usr/bin/env bash
# A 30 s CPU profile of the measured phase (about 60-90 s in) of one run at twice capacity and
# one at capacity (session 25's capp.sh, liveness API, 20,000 workers).
export OUT=${OUT:-/tmp/s27/prof}
exec ../2026-11-28-session25/capp.sh "${1:-/tmp/s27/exempt}" prof c20400:0.980s:100s c12000:1.667s:100s
