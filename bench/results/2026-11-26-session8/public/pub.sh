#!/bin/bash
# pub.sh NAME BIN WORKERS [env...]: one public-API run, unpinned (generator on the same 2 cores)
name=$1 bin=$2 workers=$3; shift 3
out=${OUT:-/tmp/pubres}; mkdir -p $out
dir=$(mktemp -d)
env "$@" $bin server start --db-filename $dir/v.db --port 22233 --http-port 22243 --log-level warn > $out/$name.server.log 2>&1 &
spid=$!
sleep 2
/work/main/bin/vigil-new bench --address 127.0.0.1:22233 --api public --server-pid $spid --workers $workers --interval 1s --duration ${DUR:-40s} --warmup ${WARM:-10s} --json $out/$name.json > $out/$name.txt 2>&1
kill $spid; wait $spid 2>/dev/null
rm -rf $dir
echo "$name $(grep -E '^throughput' $out/$name.txt | cut -c13-60) $(grep -E '^latency' $out/$name.txt | cut -c13-80) $(grep -E '^server' $out/$name.txt)" >> $out/summary
