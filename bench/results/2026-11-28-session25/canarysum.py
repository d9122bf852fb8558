#!/usr/bin/env python3
"""canarysum.py CANARY0 CANARY1 RUN.sec ...: for each run of cap.sh/capx.sh, the measured phase
(45-98 s) from its per-second samples: heartbeats served per second and the server's CPU per
heartbeat served, beside the median canary times on the server's core (CANARY0) and the
generator's (CANARY1) over the same seconds. A run's start is its .sec file's mtime less its
last sample's time."""
import os, statistics, sys

def canary(path):
    rows = []
    for line in open(path):
        p = line.split()
        if len(p) == 3:
            rows.append((float(p[0]), int(p[1]), int(p[2])))
    return rows

def window(rows, a, b):
    sel = [r for r in rows if a <= r[0] <= b]
    if not sel:
        return float("nan"), float("nan")
    return statistics.median(r[1] for r in sel), statistics.median(r[2] for r in sel)

c0, c1 = canary(sys.argv[1]), canary(sys.argv[2])
for sec in sys.argv[3:]:
    samples = [l.split() for l in open(sec) if l.strip()]
    t_end = os.path.getmtime(sec)
    t0 = t_end - float(samples[-1][0])
    pts = [(float(s[0]), int(s[1]), int(s[3])) for s in samples
           if len(s) > 3 and s[1].isdigit() and s[2] == "hb" and int(s[3]) > 0]
    pts = [p for p in pts if 45 < p[0] < 98]
    if len(pts) < 2:
        continue
    dt = pts[-1][0] - pts[0][0]
    served = (pts[-1][2] - pts[0][2]) / dt
    cpu = (pts[-1][1] - pts[0][1]) / 100 / dt  # clock ticks, 100 a second
    k0, m0 = window(c0, t0 + 45, t0 + 98)
    k1, m1 = window(c1, t0 + 45, t0 + 98)
    name = os.path.basename(sec)[:-4]
    print(f"{name:22s} served/s {served:5.0f} cpu {cpu*100:3.0f}% us/served {cpu/served*1e6:4.0f}"
          f" | canary core0 sha {k0:4.0f}us mem {m0:5.0f}us | core1 sha {k1:4.0f}us mem {m1:5.0f}us")
