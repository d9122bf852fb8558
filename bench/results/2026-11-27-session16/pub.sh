#!/usr/bin/env bash
# pub.sh BIN TAG N: issue 19's row 3 (public API, 10 s interval), server and generator unpinned as in the table's sitting
bin=$1; tag=$2; n=$3; out=/tmp/s16/pub
while ss -ltn | grep -q ":21233 "; do sleep 5; done
dir=$(mktemp -d)
$bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn $SFLAGS > $out/$tag-$n.server.log 2>&1 &
spid=$!; sleep 2
/tmp/s16/gen bench --api public --address 127.0.0.1:21233 --server-pid $spid --workers $n --interval 10s \
  --duration 100s --warmup 40s --json $out/$tag-$n.json > $out/$tag-$n.txt 2> $out/$tag-$n.progress
kill $spid; wait $spid; rm -rf $dir
echo "$tag-$n: $(grep -E '^throughput' $out/$tag-$n.txt) $(grep -E '^latency' $out/$tag-$n.txt)"
