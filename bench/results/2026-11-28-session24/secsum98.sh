#!/usr/bin/env bash
# secsum.sh FILE.sec ...: the measured phase of a 100 s run (45-98 s) of cap.sh's per-second samples: server
# CPU, heartbeats served, refused in the tap, shed by admission (per second), and the means of
# outstanding, queued, in-flight limit, heap in use and writes per group commit.
for f in "$@"; do awk '{print $1, $2, $4, $6, $8, $12, $14, $16, $20, $22}' $f | awk -v f=$(basename $f .sec) '$3>0 && $8>0 { if (ok && $1>45 && $1<98 && $3>=p3) {dt=$1-p1; n++; cpu+=($2-p2); hb+=($3-p3); er+=($4-p4); sh+=($5-p5); T+=dt; os+=$6; q+=$7; lim+=$8; heap+=$9; cm+=($10-p10); if($6>mos)mos=$6} p1=$1;p2=$2;p3=$3;p4=$4;p5=$5;p10=$10; ok=1; next} {ok=0} END {printf "%-14s cpu %3.0f%% served/s %5.0f tap-refused/s %5.0f shed/s %4.0f outstanding %5.0f (max %5d) queued %5.0f limit %4.1f heapMiB %3.0f writes/commit %5.1f\n", f, cpu/T, hb/T, er/T, sh/T, os/n, mos, q/n, lim/n, heap/n, hb/cm}'; done
