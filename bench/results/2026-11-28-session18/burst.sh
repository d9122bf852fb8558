#!/usr/bin/env bash
# burst.sh BIN TAG [cpu]: issue 19's burst row (scenario 5): 20,000 workers at 10 s on the public API, 20,000 more registering at one instant; unpinned. SFLAGS for the server.
bin=$1; tag=$2; out=/tmp/s18/burst
while ss -ltn | grep -q ":21233 "; do sleep 5; done
dir=$(mktemp -d)
pprof=; [ "$3" = cpu ] && pprof=--pprof
$bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn $pprof $SFLAGS > $out/$tag.server.log 2>&1 &
spid=$!; sleep 2
/tmp/s18/gen bench --api public --address 127.0.0.1:21233 --server-pid $spid --metrics-url http://127.0.0.1:21243/metrics \
  --workers 20000 --interval 10s --duration 60s --warmup 10s --register-burst 20000 \
  --json $out/$tag.json > $out/$tag.txt 2> $out/$tag.progress &
gpid=$!
# cpu: a 20 s CPU profile from 33 s on, across the burst (at 35 s)
if [ "$3" = cpu ]; then sleep 33; curl -s -o $out/$tag.cpu "http://127.0.0.1:21243/debug/pprof/profile?seconds=20"; fi
wait $gpid
curl -s http://127.0.0.1:21243/metrics > $out/$tag.metrics
kill $spid; wait $spid; rm -rf $dir
echo "$tag: $(grep -E '^latency|^burst' $out/$tag.txt | tr '\n' ' ')"
