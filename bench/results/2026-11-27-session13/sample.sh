#!/usr/bin/env bash
# sample.sh PID OUT: one line a second of the server's key counters
pid=$1; out=$2; t0=$(date +%s)
db=$(tr '\0' ' ' < /proc/$pid/cmdline | sed -E 's/.*--db-filename ([^ ]+).*/\1/')
while kill -0 $pid 2>/dev/null; do
  m=$(curl -s --max-time 2 http://127.0.0.1:21243/metrics)
  g() { echo "$m" | awk -v k="$1" 'index($0,k)==1 {s+=$NF} END {printf "%.0f", s}'; }
  g3() { echo "$m" | awk -v k="$1" 'index($0,k)==1 {s+=$NF} END {printf "%.3f", s}'; }
  wal=$(stat -c %s $db-wal 2>/dev/null)
  echo "$(( $(date +%s) - t0 )) cpu=$(g3 process_cpu_seconds_total) gcl=$(g3 vigil_group_commit_latency_seconds_sum) gcn=$(g vigil_group_commit_latency_seconds_count) gbs=$(g vigil_group_commit_batch_size_sum) q=$(g vigil_admission_queued) out=$(g vigil_heartbeats_outstanding) ref=$(g vigil_early_refusals_total) shed=$(g vigil_admission_shed_total) fired=$(g vigil_timer_tasks_fired_total) tq=$(g vigil_timer_queue_in_memory) heap=$(g go_memstats_heap_alloc_bytes) gcp=$(g vigil_gc_percent) gcs=$(g go_gc_duration_seconds_count) lim=$(g vigil_admission_in_flight_limit) wal=$wal" >> $out
  sleep 1
done
