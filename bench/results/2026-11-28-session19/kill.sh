#!/usr/bin/env bash
# kill.sh rec|ovl BIN TAG: a fresh server, vigil bench with 100 workers killed mid-run, unpinned.
#   rec: scenario 3 (1,000 workers x 100 activities, 10 s interval, 30 s lease)
#   ovl: a kill during an overload (8,000 workers x 10 activities at 1 s, 5 s lease)
case $1 in
  rec) args="--workers 1000 --activities 100 --interval 10s --lease 30s --duration 60s" ;;
  ovl) args="--workers 8000 --activities 10 --interval 1s --lease 5s --duration 80s --warmup 30s" ;;
  *) echo "usage: kill.sh rec|ovl BIN TAG" >&2; exit 2 ;;
esac
bin=$2; tag=$3; out=/tmp/s19/$1
while ss -ltn | grep -q ":21233 "; do sleep 5; done
dir=$(mktemp -d)
$bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn > $out/$tag.server.log 2>&1 &
spid=$!; sleep 2
/tmp/s19/gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid --metrics-url http://127.0.0.1:21243/metrics \
  $args --kill 100 --json $out/$tag.json > $out/$tag.txt 2> $out/$tag.progress
curl -s http://127.0.0.1:21243/metrics > $out/$tag.metrics
kill $spid; wait $spid; rm -rf $dir
echo "$tag: $(grep -E '^throughput|^latency|^killed|^detection|^hand|^errors' $out/$tag.txt | tr '\n' ' ')"
