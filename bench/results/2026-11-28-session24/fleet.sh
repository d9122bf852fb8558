#!/usr/bin/env bash
# fleet.sh BIN TAG: the issue's 100,000-worker run (30 s interval, 90 s lease, 200 s, 60 s
# warm-up, 100 killed), server pinned to CPU 0 and generator to CPU 1, with the admission
# gauges sampled every 2 s ($tag.samples: seconds, in-flight limit, queued, outstanding, RSS KiB).
# SFLAGS: extra server flags. Session 23: API (liveness or public), LEASE (set it empty for the
# public API, whose lease is three reported intervals) and GFLAGS (generator flags, such as
# --retry-resource-exhausted).
set -u
bin=$1; tag=$2; out=${OUT:-/tmp/s23/fleet}; gen=${GEN:-$bin}; mkdir -p $out
while ss -ltn | grep -q ":21233 "; do sleep 5; done
dir=$(mktemp -d)
cfg=(${SFLAGS:-})
env GOMAXPROCS=1 taskset -c 0 $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn "${cfg[@]}" > $out/$tag.server.log 2>&1 &
spid=$!; sleep 2
env GOMAXPROCS=1 taskset -c 1 $gen bench --api ${API:-liveness} --address 127.0.0.1:21233 --server-pid $spid \
  --metrics-url http://127.0.0.1:21243/metrics --workers 100000 --interval 30s ${LEASE---lease 90s} \
  --duration 200s --warmup 60s --kill 100 ${GFLAGS:-} --json $out/$tag.json > $out/$tag.txt 2> $out/$tag.progress &
gpid=$!
( t0=$(date +%s); while kill -0 $gpid 2>/dev/null; do
    echo "$(( $(date +%s) - t0 )) $(curl -s --max-time 1 http://127.0.0.1:21243/metrics | awk '/^vigil_heartbeats_outstanding |^vigil_admission_queued |^vigil_admission_in_flight_limit / {printf "%s ", $2}') $(grep VmRSS /proc/$spid/status | awk '{print $2}')"
    sleep 2; done ) > $out/$tag.samples &
taskset -pc 1 $! > /dev/null
wait $gpid
curl -s http://127.0.0.1:21243/metrics | gzip > $out/$tag.metrics.gz
kill $spid; wait $spid; rm -rf $dir
echo "$tag: $(grep -E '^throughput' $out/$tag.txt)"
