#!/usr/bin/env bash
# pair.sh TAG BENCH_ARGS...: before then after, same args
tag=$1; shift
for v in before after; do
  ./run.sh /tmp/burst/vigil-$v $v-$tag --dynamic-config-value worker.registrationRPS=100000 -- "$@"
done
