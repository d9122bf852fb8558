#!/bin/bash
# ab.sh OUT: interleaved overload runs (11,830/s offered, 2x the ladder's fallback figure of 5,916/s) on one pinned core (server on CPU 0, generator on
# CPU 1, GOMAXPROCS=1 each), 20,000 liveness workers at 1.69 s (2 x the 5,916/s this core
# carried that day), lease 5.07 s, 100 killed, 40 s warm-up so that the fleet's registration
# (1,000/s per caller) is out of the window; each run stopped after 150 s.
#   bin/vigil-base: e3c2a09 (before); bin/vigil-er: 166f37e
#   /tmp/er-off.yaml: "frontend.earlyRefusalTargetWait: [{value: 0s}]" (the gate alone)
out=$1; mkdir -p $out
run() { # name bin extra
  local name=$1 bin=$2; shift 2
  local dir=$(mktemp -d)
  env GOMAXPROCS=1 taskset -c 0 $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn "$@" > $out/$name.server.log 2>&1 &
  local spid=$!
  sleep 2
  env GOMAXPROCS=1 taskset -c 1 $bin bench --api liveness --address 127.0.0.1:21233 --server-pid $spid --metrics-url http://127.0.0.1:21243/metrics --workers 20000 --interval 1.690s --lease 5.070s --duration 110s --warmup 40s --kill 100 --json $out/$name.json > $out/$name.txt 2>$out/$name.progress &
  local gpid=$!
  sleep 150; kill -INT $gpid 2>/dev/null; wait $gpid
  curl -s http://127.0.0.1:21243/metrics > $out/$name.metrics
  kill $spid; wait $spid
  rm -rf $dir
  echo "$name $(grep -E '^throughput' $out/$name.txt)" >> $out/summary
}
for r in 1 2; do
  run base$r /work/main/bin/vigil-base
  run gate$r /work/main/bin/vigil-er --dynamic-config-file /tmp/er-off.yaml
  run er$r /work/main/bin/vigil-er
done
echo done >> $out/summary
