#!/usr/bin/env bash
# fleet100k.sh BIN TAG: 100,000 idle workers beating every 120 s (833/s), server CPU over the steady phase
bin=$1; tag=$2; out=/tmp/s17/fleet; mkdir -p $out; gen=/tmp/s17/gen
while ss -ltn | grep -q ":21233 "; do sleep 5; done
dir=$(mktemp -d)
env GOMAXPROCS=1 taskset -c 0 $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn --pprof $SFLAGS > $out/$tag.server.log 2>&1 &
spid=$!; sleep 2
env GOMAXPROCS=1 taskset -c 1 $gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid \
  --metrics-url http://127.0.0.1:21243/metrics --workers 100000 --interval 120s --lease 360s \
  --duration 330s --warmup 210s --json $out/$tag.json > $out/$tag.txt 2> $out/$tag.progress &
gpid=$!
( t0=$(date +%s); while kill -0 $gpid 2>/dev/null; do echo "$(( $(date +%s) - t0 )) $(awk '{print $14+$15}' /proc/$gpid/stat) $(awk '{print $14+$15}' /proc/$spid/stat) $(grep VmRSS /proc/$spid/status | awk '{print $2}')"; sleep 5; done ) > $out/$tag.ticks &
( sleep 300; curl -s -o $out/$tag.cpu 'http://127.0.0.1:21243/debug/pprof/profile?seconds=30' ) &
wait $gpid
curl -s http://127.0.0.1:21243/metrics > $out/$tag.metrics
kill $spid; wait $spid; rm -rf $dir
echo "$tag: $(grep -E '^throughput' $out/$tag.txt)"
