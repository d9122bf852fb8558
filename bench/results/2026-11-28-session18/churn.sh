#!/usr/bin/env bash
# churn.sh BIN TAG CHURN [cpu|trace]: issue 19's Temporal scenario (1,000 workers x 100 activities, 20 s), churn % every 10 s, unpinned
# S is where the binaries and outputs live (session 19 ran it with S=/tmp/s19).
S=${S:-/tmp/s18}
bin=$1; tag=$2; c=$3; out=$S/churn
while ss -ltn | grep -q ":21233 "; do sleep 5; done
dir=$(mktemp -d)
$bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn --pprof $SFLAGS > $out/$tag-c$c.server.log 2>&1 &
spid=$!; sleep 2
$S/gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid --metrics-url http://127.0.0.1:21243/metrics \
  --workers 1000 --activities 100 --interval 20s --duration 120s --churn $c --churn-period 10s \
  --json $out/$tag-c$c.json > $out/$tag-c$c.txt 2> $out/$tag-c$c.progress &
gpid=$!
case "$4" in
  cpu) sleep 40; curl -s -o $out/$tag-c$c.cpu "http://127.0.0.1:21243/debug/pprof/profile?seconds=60" ;;
  trace) sleep 45; curl -s -o $out/$tag-c$c.trace "http://127.0.0.1:21243/debug/pprof/trace?seconds=10" ;;
esac
wait $gpid
curl -s http://127.0.0.1:21243/metrics > $out/$tag-c$c.metrics
kill $spid; wait $spid; rm -rf $dir
echo "$tag-c$c: $(grep -E '^latency' $out/$tag-c$c.txt) $(grep -E '^server' $out/$tag-c$c.txt)"
