# phasek.awk [-v P=20 -v S=5 -v N=16] FILE.sec: server CPU, heartbeats served and refused early
# a second in each settled phase of an alternating run (a 40 s warm-up, then N phases of P
# seconds, the first S of each left out; even phases at the base rate, odd ones at the high
# rate), from cap.sh's per-second samples, then the mean of each kind of phase.
BEGIN { if (!P) P=20; if (!S) S=5; if (!N) N=16 }
function ph(t,  k, in_) { if (t < 40) return -1; k = int((t-40)/P); in_ = t-40-P*k; if (in_ < S || k >= N) return -1; return k }
$4>0 { if (pt != "" && ph(pt) >= 0 && ph(pt) == ph($1)) { p=ph($1); dt[p]+=$1-pt; cpu[p]+=$2-pc; hb[p]+=$4-ph_; er[p]+=$6-pe }
  pt=$1; pc=$2; ph_=$4; pe=$6 }
END { for (p=0;p<N;p++) if (dt[p]>0) { k=p%2; printf "%2d %s cpu %.2f served %5.0f refused %5.0f\n", p, k?"high":"base", cpu[p]/100/dt[p], hb[p]/dt[p], er[p]/dt[p]; T[k]+=dt[p]; C[k]+=cpu[p]; H[k]+=hb[p]; E[k]+=er[p] }
  for (k=0;k<2;k++) if (T[k]>0) printf "%s: %s cpu %.3f served %5.0f refused %5.0f (%.0f s)\n", FILENAME, k?"high":"base", C[k]/100/T[k], H[k]/T[k], E[k]/T[k], T[k] }
