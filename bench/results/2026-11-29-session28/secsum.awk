# secsum.awk FILE.sec: the measured phase (45-100 s) of a cap.sh run from its per-second
# samples: heartbeats served a second, commits a second and their size, mean heartbeats
# outstanding and queued in admission, the in-flight limit, collections a second.
# fields: t cpu hb X er X sh X dr X os X q X lim X gc X heapMiB X commits X
$1>45 && $1<100 && $4>0 {if(!h0){h0=$4;c0=$22;t0=$1;g0=$18} n++; os+=$12; q+=$14; lim+=$16; h1=$4;c1=$22;t1=$1;g1=$18}
END {dt=t1-t0; dc=c1-c0; if(dc<1)dc=1; printf "%-16s served/s %5d commits/s %4.0f per-commit %4.0f mean os %5d q %5d lim %4.1f gc/s %.2f\n", FILENAME, (h1-h0)/dt, dc/dt, (h1-h0)/dc, os/n, q/n, lim/n, (g1-g0)/dt}
