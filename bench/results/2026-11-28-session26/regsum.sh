#!/usr/bin/env bash
# regsum.sh DIR TAG...: per run, goodput, the registrations granted, dropped and shed, the
# workers the server knows at the end (every state), and the live workers declared INACTIVE
# (lease expiries released on evidence, resurrections).
dir=$1; shift
for t in "$@"; do
  for f in "$dir"/$t*.metrics.gz; do
    n=$(basename "$f" .metrics.gz)
    m() { zcat "$f" | awk -v k="$1" 'index($0,k)==1 {s+=$NF} END {print s+0}'; }
    printf "%-18s %7s ok/s  reg granted %6s dropped %6s shed %6s  workers %6s  released_on_evidence %s resurrections %s\n" "$n" \
      "$(grep -oE '^throughput +[0-9.]+' "$dir/$n.txt" | awk '{print $2}')" \
      "$(m 'vigil_admission_queue_delay_seconds_count{kind="registration"}')" \
      "$(m 'vigil_admission_dropped_total{kind="registration"}')" \
      "$(m 'vigil_admission_shed_total{kind="registration"}')" \
      "$(m 'vigil_workers_by_state')" \
      "$(m 'vigil_worker_lease_expiries_released_on_evidence_total')" \
      "$(m 'vigil_worker_resurrections_total')"
  done
done
