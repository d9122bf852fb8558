#!/usr/bin/env bash
./sdk.sh /tmp/s24/pat pat i4.5:4.5s
./sdk.sh /tmp/s24/main main i4.5:4.5s
