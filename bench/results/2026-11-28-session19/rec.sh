#!/usr/bin/env bash
# rec.sh BIN TAG: scenario 3 (100 workers x 100 activities killed at once), unpinned
bin=$1; tag=$2; out=/tmp/s19/rec
while ss -ltn | grep -q ":21233 "; do sleep 5; done
dir=$(mktemp -d)
$bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn > $out/$tag.server.log 2>&1 &
spid=$!; sleep 2
/tmp/s19/gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid --metrics-url http://127.0.0.1:21243/metrics \
  --workers 1000 --activities 100 --interval 10s --lease 30s --duration 60s --kill 100 \
  --json $out/$tag.json > $out/$tag.txt 2> $out/$tag.progress
curl -s http://127.0.0.1:21243/metrics > $out/$tag.metrics
kill $spid; wait $spid; rm -rf $dir
echo "$tag: $(grep -E '^latency|^kill|^detect|^hand|^redisp' $out/$tag.txt | tr '\n' ' ')"
