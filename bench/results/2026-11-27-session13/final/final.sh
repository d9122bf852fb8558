#!/usr/bin/env bash
cd /work/main
LOAD="--interval 30s --lease 90s --duration 200s --warmup 60s --kill 100" OUT=/tmp/s13/final GEN=/tmp/vigil-base bench/results/2026-11-26-session12/fleet/fleet.sh /tmp/vigil-final issue-final
source <(sed -n '/^run()/,/^}/p' /tmp/s13/cap.sh)
out=/tmp/s13/final; bin=/tmp/vigil-final; gen=/tmp/vigil-base
run cap6000 3.333s 150s
run cap7500 2.667s 150s
run over12000 1.667s 280s --kill 100
