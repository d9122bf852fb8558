#!/usr/bin/env bash
# capacity and twice-capacity runs at 20,000 workers; server CPU 0, generator CPU 1
out=/tmp/s13/cap; mkdir -p $out; bin=/tmp/vigil-s13; gen=/tmp/vigil-base
run() { # name interval duration [kill]
  name=$1; iv=$2; dur=$3; shift 3
  while ss -ltn | grep -q ":21233 "; do sleep 5; done
  dir=$(mktemp -d)
  env GOMAXPROCS=1 taskset -c 0 $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn > $out/$name.server.log 2>&1 &
  spid=$!; sleep 2
  env GOMAXPROCS=1 taskset -c 1 $gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid \
    --metrics-url http://127.0.0.1:21243/metrics --workers 20000 --interval $iv --lease $(python3 -c "print(f'{3*float(\"$iv\".rstrip(\"s\")):.3f}s')") \
    --duration $dur --warmup 40s "$@" --json $out/$name.json > $out/$name.txt 2> $out/$name.progress
  curl -s http://127.0.0.1:21243/metrics > $out/$name.metrics
  kill $spid; wait $spid; rm -rf $dir
}
run cap4500 4.444s 150s
run cap6000 3.333s 150s
run cap7500 2.667s 150s
run over9000 2.222s 280s --kill 100
