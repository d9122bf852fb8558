#!/usr/bin/env bash
# usage: cap.sh BIN TAG name:interval:duration[:extra] ...
# env: SFLAGS (server flags), NOSAMPLE=1 (no per-second sampler), STRACE=1 (the server under
# strace, fsyncs only, into $out/$tag-$name.strace; stop the traced server by hand afterwards:
# killing strace detaches it)
bin=$1; tag=$2; shift 2; out=/tmp/s16/cap; gen=/tmp/s16/gen
for spec in "$@"; do
  IFS=: read name iv dur extra <<< "$spec"
  while ss -ltn | grep -q ":21233 "; do sleep 5; done
  dir=$(mktemp -d)
  trace=()
  [ -n "$STRACE" ] && trace=(strace -f --seccomp-bpf -e trace=fsync,fdatasync -T -tt -y -o $out/$tag-$name.strace)
  env GOMAXPROCS=1 taskset -c 0 "${trace[@]}" $bin server start --db-filename $dir/v.db --port 21233 --http-port 21243 --log-level warn $SFLAGS > $out/$tag-$name.server.log 2>&1 &
  spid=$!; sleep 2
  [ -z "$NOSAMPLE" ] && taskset -c 1 /work/main/bench/results/2026-11-27-session13/sample.sh $spid $out/$tag-$name.samples > /dev/null 2>&1 &
  smp=$!
  env GOMAXPROCS=1 taskset -c 1 $gen bench --api liveness --address 127.0.0.1:21233 --server-pid $spid \
    --metrics-url http://127.0.0.1:21243/metrics --workers 20000 --interval $iv --lease $(python3 -c "print(f'{3*float(\"$iv\".rstrip(\"s\")):.3f}s')") \
    --duration $dur --warmup 40s $extra --json $out/$tag-$name.json > $out/$tag-$name.txt 2> $out/$tag-$name.progress &
  gpid=$!
  ( t0=$(date +%s); while kill -0 $gpid 2>/dev/null; do echo "$(( $(date +%s) - t0 )) $(awk '{print $14+$15}' /proc/$gpid/stat) $(awk '{print $14+$15}' /proc/$spid/stat)"; sleep 2; done ) > $out/$tag-$name.ticks &
  wait $gpid
  curl -s http://127.0.0.1:21243/metrics > $out/$tag-$name.metrics
  kill $smp 2>/dev/null
  kill $spid; wait $spid; rm -rf $dir
  echo "$tag-$name: $(grep -E '^throughput' $out/$tag-$name.txt)"
done
