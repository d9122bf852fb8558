#!/bin/bash
# ladder.sh OUT BIN RATES...: capacity ladder, 20,000 workers, 40 s warm-up, 60 s measured
out=$1; bin=$2; shift 2; mkdir -p $out
for r in "$@"; do
  iv=$(awk -v r=$r 'BEGIN{printf "%.3f", 20000/r}'); ls=$(awk -v r=$r 'BEGIN{printf "%.3f", 3*20000/r}')
  dir=$(mktemp -d)
  env GOMAXPROCS=1 taskset -c 0 $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn > $out/cap-$r.server.log 2>&1 &
  spid=$!; sleep 2
  env GOMAXPROCS=1 taskset -c 1 $bin bench --api liveness --address 127.0.0.1:21233 --server-pid $spid --metrics-url http://127.0.0.1:21243/metrics --workers 20000 --interval ${iv}s --lease ${ls}s --duration 100s --warmup 40s --json $out/cap-$r.json > $out/cap-$r.txt 2>/dev/null
  kill $spid; wait $spid; rm -rf $dir
  echo "cap-$r $(grep -E '^throughput' $out/cap-$r.txt | awk '{print $2}') $(grep -E '^latency' $out/cap-$r.txt | awk '{print "p99", $10}')" >> $out/summary
done
echo done >> $out/summary
