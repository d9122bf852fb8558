#!/usr/bin/env bash
export OUT=/tmp/s24/cap
API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted ./capx.sh /tmp/s24/pat2 pub-pat2d c8000:2.5s:100s
API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted ./capx.sh /tmp/s24/main pub-maind c8000:2.5s:100s
GFLAGS= ./capx.sh /tmp/s24/pat2 giveup-pat2 c8000:2.5s:100s
