#!/usr/bin/env bash
# Deaths are still found just past capacity (session 23's sdk.sh: 20,000 SDK-like workers,
# 4.5 s interval, about 4,300/s, 100 killed halfway) with the brake's change.
OUT=/tmp/s25/sdk ../2026-11-28-session23/sdk.sh /tmp/s25/fix fix i4.5:4.5s
OUT=/tmp/s25/sdk ../2026-11-28-session23/sdk.sh /tmp/s25/main main i4.5:4.5s
# A second pair, main first.
OUT=/tmp/s25/sdk ../2026-11-28-session23/sdk.sh /tmp/s25/main mainb i4.5:4.5s
OUT=/tmp/s25/sdk ../2026-11-28-session23/sdk.sh /tmp/s25/fix fixb i4.5:4.5s
