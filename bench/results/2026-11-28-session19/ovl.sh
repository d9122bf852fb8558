#!/usr/bin/env bash
# ovl.sh BIN TAG: 20,000 workers x 10 activities at a 2 s interval (10,000/s offered, past this box's capacity), 100 killed mid-run
bin=$1; tag=$2; out=/tmp/s19/ovl
while ss -ltn | grep -q ":21233 "; do sleep 5; done
dir=$(mktemp -d)
$bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn > $out/$tag.server.log 2>&1 &
spid=$!; sleep 2
/tmp/s19/gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid --metrics-url http://127.0.0.1:21243/metrics \
  --workers 8000 --activities 10 --interval 1s --lease 5s --duration 80s --warmup 30s --kill 100 \
  --json $out/$tag.json > $out/$tag.txt 2> $out/$tag.progress
curl -s http://127.0.0.1:21243/metrics > $out/$tag.metrics
kill $spid; wait $spid; rm -rf $dir
echo "$tag: $(grep -E '^throughput|^latency|^killed|^detection|^hand|^errors' $out/$tag.txt | tr '\n' ' ')"
