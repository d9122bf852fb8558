#!/usr/bin/env bash
# The issue's 100,000-worker run (session 23's fleet.sh: liveness API, 30 s interval, 90 s
# lease, 200 s, 60 s warm-up, 100 killed) with collections 5 s apart (the new default of
# system.gcTargetInterval) and 2 s apart (the old), one after the other.
export OUT=/tmp/s26/fleet
SFLAGS='--dynamic-config-value system.gcTargetInterval="5s"' ../2026-11-28-session23/fleet.sh /tmp/s26/main fleet-gc5s
SFLAGS='--dynamic-config-value system.gcTargetInterval="2s"' ../2026-11-28-session23/fleet.sh /tmp/s26/main fleet-gc2s
