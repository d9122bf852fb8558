#!/usr/bin/env bash
# run.sh BIN NAME SERVER_ARGS -- BENCH_ARGS
set -u
bin=$1; name=$2; shift 2
sargs=(); while [ "$1" != "--" ]; do sargs+=("$1"); shift; done; shift
out=/work/wt/burst/bench/results/2026-11-24-burst
dir=$(mktemp -d /tmp/burst/db.XXXX)
$bin server start --db-filename $dir/v.db --port 23300 --http-port 23343 --log-level warn "${sargs[@]}" >$out/$name.server.log 2>&1 &
pid=$!
for i in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/23300) 2>/dev/null && break; sleep 0.1; done
{ echo "server: $bin ${sargs[*]}"; echo "bench: $*"; echo "before: $(uptime)"; } > $out/$name.meta
$bin bench --address 127.0.0.1:23300 --server-pid $pid --metrics-url http://127.0.0.1:23343/metrics --json $out/$name.json "$@" >$out/$name.txt 2>$out/$name.progress
echo "after: $(uptime)" >> $out/$name.meta
curl -sf http://127.0.0.1:23343/metrics > $out/$name.metrics
kill $pid; wait $pid 2>/dev/null
rm -rf $dir
cat $out/$name.txt
