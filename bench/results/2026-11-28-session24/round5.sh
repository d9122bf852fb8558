#!/usr/bin/env bash
OUT=/tmp/s24/sdk ../2026-11-28-session23/sdk.sh /tmp/s24/pat pat i4.5:4.5s
OUT=/tmp/s24/sdk ../2026-11-28-session23/sdk.sh /tmp/s24/main main i4.5:4.5s
