#!/usr/bin/env bash
export OUT=/tmp/s24/cap API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted
./capx.sh /tmp/s24/main pub-maine c8000:2.5s:100s
./capx.sh /tmp/s24/pat2 pub-pat2e c8000:2.5s:100s
