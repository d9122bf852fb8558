#!/usr/bin/env bash
# prof.sh BIN TAG interval duration: 20k workers pinned, 2x overload, CPU + alloc profiles in the measured phase
# (OUT, GFLAGS for the generator and KIND=trace added in session 25, for session 24's prof.sh)
set -u
bin=$1; tag=$2; iv=$3; dur=$4
out=${OUT:-/tmp/s23/prof}; mkdir -p $out
while ss -ltn | grep -q ":21233 "; do sleep 5; done
dir=$(mktemp -d)
env GOMAXPROCS=1 taskset -c 0 "$bin" server start --db-filename "$dir/v.db" --port 21233 --http-port 21243 \
  --log-level warn --pprof ${SFLAGS:-} > "$out/$tag.server.log" 2>&1 &
spid=$!; sleep 2
lease=$(python3 -c "print(f'{3*float(\"$iv\".rstrip(\"s\")):.3f}s')")
env GOMAXPROCS=1 taskset -c 1 "$bin" bench --api liveness --address 127.0.0.1:21233 --server-pid $spid \
  --metrics-url http://127.0.0.1:21243/metrics --workers ${WORKERS:-20000} --interval "$iv" --lease "$lease" \
  --duration "$dur" --warmup 40s ${GFLAGS:-} --json "$out/$tag.json" > "$out/$tag.txt" 2> "$out/$tag.progress" &
gpid=$!
# KIND=trace takes a 4 s runtime trace instead of the 30 s CPU profile.
if [ "${KIND:-cpu}" = trace ]; then what="$tag.trace trace?seconds=4"; else what="$tag.cpu.pprof profile?seconds=30"; fi
( sleep 60; taskset -c 1 curl -s -o $out/${what% *} "http://127.0.0.1:21243/debug/pprof/${what#* }"
  taskset -c 1 curl -s -o $out/$tag.allocs.pprof "http://127.0.0.1:21243/debug/pprof/allocs" ) &
wait $gpid
kill $spid; wait $spid; rm -rf "$dir"
echo "$tag: $(grep -E '^throughput' "$out/$tag.txt")"
