#!/usr/bin/env bash
# 100,000 workers at a 60 s interval (about 1,650 heartbeats/s, under this box's capacity at that
# fleet size): the server's CPU per heartbeat. usage: OUT=dir [GEN=generator-binary] eff.sh BIN NAME [server flags]
LOAD="--interval 60s --lease 180s --duration 240s --warmup 120s" OUT=${OUT:-/tmp/vigil-eff} \
  exec "$(dirname "$0")/fleet.sh" "$@"
