#!/usr/bin/env bash
# cmp.sh A.pprof servedA B.pprof servedB: microseconds of CPU per heartbeat served (servedA,
# servedB: heartbeats served a second) in the main cumulative nodes of two CPU profiles.
a=$1; na=$2; b=$3; nb=$4
pat='grpc.\(\*Server\).handleStream$|GroupCommitter\).commit$|HandleStreams$|runtime.gcBgMarkWorker$|runtime.gcAssistAlloc$|runtime.copystack$|loopyWriter\).run$|runtime.mcall$|runtime.schedule$|runtime.findRunnable$|operateHeaders$|Tx\).Commit$|batch\).update$|batch\).writeTasks$|chasm.UpdateWithStart|Admission\).Admit$|processRPC$|recvAndDecompress$|malformedInterceptor$|metricsInterceptor.func3$|abuseLimiter\).intercept$|connTracker\).intercept$|Handler\).RecordHeartbeats$|tasks.\(\*TimerQueue\).loop$|runtime.mallocgc$|Syscall6$|runtime.scanstack$|lockEntry$|Execution\).Update$|Shard\).write$|NotifyNewTimers$|sendResponse$|WriteStatus$'
dur() { go tool pprof -top -cum -nodecount=5000 "$1" 2>/dev/null | awk '/^Duration/ {gsub("s,","",$2); print $2}'; }
da=$(dur $a); db=$(dur $b)
join -t'|' <(go tool pprof -top -cum -nodecount=5000 $a 2>/dev/null | grep -E "$pat" | awk -v n=$na -v d=$da '{v=$4; sub("s$","",v); if(v~/ms$/){sub("ms","",v); v/=1000} printf "%s|%.1f\n", $6, v*1e6/(n*d)}' | sort -t'|' -k1,1) \
 <(go tool pprof -top -cum -nodecount=5000 $b 2>/dev/null | grep -E "$pat" | awk -v n=$nb -v d=$db '{v=$4; sub("s$","",v); if(v~/ms$/){sub("ms","",v); v/=1000} printf "%s|%.1f\n", $6, v*1e6/(n*d)}' | sort -t'|' -k1,1) | awk -F'|' '{printf "%-80s %7s %7s\n", substr($1,1,80), $2, $3}' | sort -k2 -n -r
