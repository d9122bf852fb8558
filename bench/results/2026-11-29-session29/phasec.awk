# phasec.awk [-v P=20 -v S=5 -v N=16] FILE.sec: per kind of phase of an alternating run: commits
# a second, heartbeats per commit, and the mean outstanding, queued and in-flight limit.
BEGIN { if (!P) P=20; if (!S) S=5; if (!N) N=16 }
function ph(t,  k, in_) { if (t < 40) return -1; k = int((t-40)/P); in_ = t-40-P*k; if (in_ < S || k >= N) return -1; return k }
$4>0 { if (pt != "" && ph(pt) >= 0 && ph(pt) == ph($1)) { k=ph($1)%2; dt[k]+=$1-pt; hb[k]+=$4-ph_; cm[k]+=$22-pcm; n[k]++; os[k]+=$12; q[k]+=$14; lim[k]+=$16 }
  pt=$1; ph_=$4; pcm=$22 }
END { for (k=0;k<2;k++) if (dt[k]>0) printf "%s: %s commits/s %4.1f per-commit %4.0f os %5.0f q %5.0f lim %4.1f\n", FILENAME, k?"high":"base", cm[k]/dt[k], hb[k]/cm[k], os[k]/n[k], q[k]/n[k], lim[k]/n[k] }
