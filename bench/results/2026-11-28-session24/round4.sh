#!/usr/bin/env bash
# public API (the SDK's RecordWorkerHeartbeat, client-name temporal-go), SDK retries, 2x
export OUT=/tmp/s24/cap API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted
for r in a b c; do
./capx.sh /tmp/s24/pat pub-pat$r c8000:2.5s:100s
./capx.sh /tmp/s24/main pub-main$r c8000:2.5s:100s
done
