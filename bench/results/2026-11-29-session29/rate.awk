# rate.awk FILE.sec: over the measured phase (45-100 s): CPU (share of a core), heartbeats served/s, refused early/s, shed+dropped/s
$1>45 && $1<100 && $4>0 {if(!t0){t0=$1;c0=$2;h0=$4;e0=$6;s0=$8+$10} t1=$1;c1=$2;h1=$4;e1=$6;s1=$8+$10}
END {dt=t1-t0; printf "%-22s cpu %.3f served %6.0f refused %6.0f shed %5.0f\n", FILENAME, (c1-c0)/100/dt, (h1-h0)/dt, (e1-e0)/dt, (s1-s0)/dt}
