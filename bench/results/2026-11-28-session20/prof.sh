#!/usr/bin/env bash
# prof.sh BIN TAG N INTERVAL: public API fleet, 30 s CPU profile from 55 s on, CPU ticks across it
bin=$1; tag=$2; n=$3; iv=$4; out=/tmp/s20/prof; mkdir -p $out
dir=$(mktemp -d)
$bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn --pprof > $out/$tag.server.log 2>&1 &
spid=$!; sleep 2
/work/main/bin/vigil bench --api public --address 127.0.0.1:21233 --server-pid $spid --workers $n --interval $iv --duration 90s --warmup 40s --json $out/$tag.json > $out/$tag.txt 2> $out/$tag.progress &
gpid=$!
sleep 55
t0=$(awk '{print $14+$15}' /proc/$spid/stat)
curl -s http://127.0.0.1:21243/metrics | grep -E '^vigil_(heartbeat|rpc)[a-z_]*count' | head -5 > $out/$tag.m0
curl -s -o $out/$tag.cpu "http://127.0.0.1:21243/debug/pprof/profile?seconds=30"
t1=$(awk '{print $14+$15}' /proc/$spid/stat)
wait $gpid
kill $spid; wait $spid; rm -rf $dir
echo "$tag: cpu over 30 s $(( (t1-t0) ))/3000 of a core; $(grep -E '^throughput|^latency' $out/$tag.txt | tr '\n' ' ')"
