#!/usr/bin/env bash
out=/tmp/s13/gc; mkdir -p $out; bin=/tmp/vigil-s13b; gen=/tmp/vigil-base
run() { name=$1; shift
  while ss -ltn | grep -q ":21233 "; do sleep 5; done
  dir=$(mktemp -d)
  env GOMAXPROCS=1 taskset -c 0 $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn "$@" > $out/$name.server.log 2>&1 &
  spid=$!; sleep 2
  env GOMAXPROCS=1 taskset -c 1 $gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid \
    --workers 20000 --interval 1.667s --lease 5s --duration 130s --warmup 40s --json $out/$name.json > $out/$name.txt 2> $out/$name.progress
  curl -s http://127.0.0.1:21243/metrics > $out/$name.metrics
  kill $spid; wait $spid; rm -rf $dir
}
run base1
run gc2s1 --dynamic-config-value 'system.gcTargetInterval="2s"' --dynamic-config-value 'system.gcMaxExtraBytes=536870912'
run base2
run gc2s2 --dynamic-config-value 'system.gcTargetInterval="2s"' --dynamic-config-value 'system.gcMaxExtraBytes=536870912'
