#!/usr/bin/env bash
# bench/memory.sh: how much memory a vigil server holds per registered worker, and whether it
# gives it back once the workers are gone.
#
# For each fleet size N it starts a fresh server (SQLite in a temporary directory), and
#   1. records the idle RSS;
#   2. registers N workers (`vigil bench --api liveness`, no activities) that keep heartbeating
#      every INTERVAL with a lease of LEASE, and records the RSS once all are registered and
#      heartbeating: (RSS - idle) / N is the memory per idle registered worker. API=public
#      registers them as SDK workers instead (RecordWorkerHeartbeat, the Go SDK's snapshot, one
#      worker per client on 4 connections; the lease is then three intervals, and LEASE only
#      bounds the wait for the expiries);
#   3. stops the fleet without ShutdownWorker, so every lease expires; with a cleanup delay and
#      a retention of 1 s each worker is then cleaned up and deleted; once the server has
#      deleted all N, it waits SETTLE and records the RSS again: after / idle says how much
#      of the fleet's memory the server kept.
# Besides RSS it reports the live Go heap (HeapAlloc just after the collection the heap
# profile forces): live_KiB/worker is what the server's data structures hold per worker, RSS
# adds the garbage collector's headroom (GOGC) and what a burst left fragmented.
#
# The summary's last columns split the RSS after into parts: heap_MiB is the Go heap in use
# (live objects and the spans they keep, with what the fleet left fragmented), rt_MiB the Go
# runtime's own memory (goroutine stacks, span and GC metadata, profiling buckets; the runtime
# sizes it for the peak heap and never gives it back), and other_MiB the rest (the binary's
# code pages, SQLite's memory outside the Go heap, the WAL index).
#
# WARM=W (default 0) first runs a fleet of W workers with a 3 s lease through the same
# expiry and deletion, and reads the idle figures only once it has gone and SETTLE has passed
# (as the figures after are read): a server that has served before, whose first-call costs
# (code paged in, pools, lazily built tables) are paid, rather than a fresh process.
#
# Usage: bench/memory.sh [N ...]            (default: 50000 100000)
# Env:   VIGIL (binary; default: built into a temporary directory), PORT (gRPC, default 22233;
#        PORT+10 is HTTP, PORT+20 history), API (liveness or public), INTERVAL (30s), LEASE
#        (90s), STEADY (3 intervals of steady heartbeats after the registrations), SETTLE
#        (150s), SERVER_ARGS (more flags
#        for `vigil server start`, e.g. --config with history.executionCacheSize),
#        OUT (directory for logs, heap profiles and summary.txt; default a temporary one),
#        MEMDIAG (a URL whose answer is added to each phase's figures: with VIGIL built by
#        `go build -tags memdiag,memory.counters ./cmd/vigil`, http://127.0.0.1:23150/ gives
#        what SQLite holds outside the Go heap; see cmd/vigil/memdiag.go).
# memstats.txt has, per phase, the RSS split (smaps_rollup), the Go runtime's view of its heap
# and metadata, and the largest resident mappings.
# Needs curl. The server runs with --pprof; heap profiles of each phase are saved in OUT.
set -euo pipefail

cd "$(dirname "$0")/.."
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(50000 100000)
PORT=${PORT:-22233}
HTTP_PORT=$((PORT + 10))
HISTORY_PORT=$((PORT + 20))
INTERVAL=${INTERVAL:-30s}
API=${API:-liveness}
LEASE=${LEASE:-90s}
SETTLE=${SETTLE:-150s}
OUT=${OUT:-$(mktemp -d /tmp/vigil-memory.XXXXXX)}
mkdir -p "$OUT"
if [ -z "${VIGIL:-}" ]; then
	VIGIL="$OUT/vigil"
	go build -o "$VIGIL" ./cmd/vigil
fi
METRICS="http://127.0.0.1:$HTTP_PORT/metrics"

secs() { # 90s | 2m → seconds
	case "$1" in
	*ms) echo 1 ;;
	*s) echo "${1%s}" ;;
	*m) echo $((${1%m} * 60)) ;;
	*) echo "$1" ;;
	esac
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
metric() { # sum of a metric's series
	curl -sf "$METRICS" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s += $2} END {printf "%d\n", s}'
}
heap() { curl -sf -o "$1" "http://127.0.0.1:$HTTP_PORT/debug/pprof/heap?gc=1" || true; }
heap_alloc_mib() {
	curl -sf "http://127.0.0.1:$HTTP_PORT/debug/pprof/heap?debug=1" |
		awk '/^# HeapAlloc = / {printf "%.1f\n", $4 / 1048576}'
}
memstats() { # phase: RSS and the Go heap's view of it, appended to $dir/memstats.txt
	{
		echo "== $1: VmRSS $(rss_kib "$pid") KiB"
		grep -E '^(Rss|Anonymous|Shared|Private)' "/proc/$pid/smaps_rollup" | tr -s ' ' | paste -sd' ' || true
		curl -sf "http://127.0.0.1:$HTTP_PORT/debug/pprof/heap?debug=1" |
			grep -E '^# (HeapAlloc|HeapSys|HeapIdle|HeapInuse|HeapReleased|Stack|MSpan|MCache|BuckHashSys|GCSys|OtherSys|NextGC) ' || true
		[ -z "${MEMDIAG:-}" ] || curl -sf "$MEMDIAG" || true
		# The largest resident mappings: the Go heap arenas (0xc0...), the runtime's own
		# metadata, SQLite's memory (modernc.org/memory mmaps it outside the Go heap), the
		# WAL index (the -shm file, shared).
		awk '/^[0-9a-f]+-[0-9a-f]+ / {m = $1 " " ($6 == "" ? "[anon]" : $6)} /^Rss:/ && $2 >= 512 {print "  " $2 " kB " m}' \
			"/proc/$pid/smaps" | sort -rn | head -12
		# Resident and anonymous kB by what is mapped (all anonymous regions together).
		awk '/^[0-9a-f]+-[0-9a-f]+ / {m = ($6 == "" ? "[anon]" : $6)} /^Rss:/ {r[m] += $2} /^Anonymous:/ {a[m] += $2}
			END {for (k in r) if (r[k] >= 64) print "  by name: " r[k] " kB (anonymous " a[k] ") " k}' "/proc/$pid/smaps" | sort -k3 -rn
	} >>"$dir/memstats.txt"
}

wait_deleted() { # max seconds: until two recounts in a row find no worker
	local deadline=$((SECONDS + $1)) zero=0
	while [ $zero -lt 2 ]; do
		if [ $SECONDS -ge $deadline ]; then
			echo "N=$n: workers still held after $((SECONDS))s: $(metric vigil_workers_by_state)" >&2
			return
		fi
		sleep 3
		if [ "$(metric vigil_workers_by_state)" -eq 0 ]; then zero=$((zero + 1)); else zero=0; fi
	done
}
runtime_split() { # "heap_KiB runtime_KiB": the Go heap in use, and the runtime's own memory
	curl -sf "http://127.0.0.1:$HTTP_PORT/debug/pprof/heap?debug=1" | awk '
		/^# HeapInuse = / {h = $4}
		/^# (Stack|MSpan|MCache) = / {r += $6} # in use / from the OS: the second
		/^# (BuckHashSys|GCSys|OtherSys) = / {r += $4}
		END {printf "%d %d\n", h / 1024, r / 1024}'
}

summary="$OUT/summary.txt"
printf '%-8s %9s %15s %11s %17s %10s %15s %11s %9s %7s %10s\n' workers idle_MiB registered_MiB KiB/worker live_KiB/worker after_MiB after_live_MiB after/idle heap_MiB rt_MiB other_MiB | tee "$summary"

for n in "${SIZES[@]}"; do
	dir="$OUT/n$n"
	mkdir -p "$dir"
	"$VIGIL" server start --db-filename "$dir/vigil.db" --port "$PORT" --http-port "$HTTP_PORT" \
		--history-port "$HISTORY_PORT" --pprof --log-level warn \
		--dynamic-config-value 'matching.InactiveWorkerCleanupDelay="1s"' \
		--dynamic-config-value 'worker.cleanedUpRetention="1s"' \
		--dynamic-config-value 'worker.registrationRPS=0' \
		--dynamic-config-value 'frontend.namespaceRPS=1000000' \
		--dynamic-config-value 'worker.expiryBrakeThreshold=1' \
		--dynamic-config-value 'worker.stateGaugeInterval="2s"' \
		${SERVER_ARGS:-} >"$dir/server.log" 2>&1 &
	pid=$!
	trap 'kill $pid 2>/dev/null || true' EXIT
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && break
		sleep 0.2
	done
	sleep 5
	if [ "${WARM:-0}" -gt 0 ]; then
		"$VIGIL" bench --address "127.0.0.1:$PORT" --api liveness --workers "$WARM" --lease 3s --interval 1s \
			--duration 5s --shutdown-at-end=false >"$dir/warm.txt" 2>&1
		wait_deleted 120
		sleep "$(secs "$SETTLE")"
	fi
	idle=$(rss_kib $pid)
	memstats idle
	heap "$dir/heap-idle.pb.gz"
	idle_live=$(heap_alloc_mib) # just after the profile's collection: the live heap
	echo "N=$n: idle RSS $((idle / 1024)) MiB; registering" >&2

	# Every worker registers within the first interval, then all heartbeat at a steady pace for
	# STEADY intervals more, so that the RSS is read well after the registration burst.
	interval_s=$(secs "$INTERVAL")
	lease=(--lease "$LEASE")
	[ "$API" = liveness ] || lease=() # an SDK heartbeat carries no lease
	"$VIGIL" bench --address "127.0.0.1:$PORT" --server-pid $pid --api "$API" --workers "$n" \
		"${lease[@]}" --interval "$INTERVAL" --duration "$((interval_s * (1 + ${STEADY:-3})))s" --warmup "$INTERVAL" \
		--shutdown-at-end=false --json "$dir/bench.json" >"$dir/bench.txt" 2>"$dir/bench.err"
	registered=$(rss_kib $pid)
	memstats registered
	heap "$dir/heap-registered.pb.gz"
	registered_live=$(heap_alloc_mib)
	# The workers the server holds (recounted from the store every 2 s): on a loaded box some
	# registrations may have failed, and the figures are per worker actually registered.
	sleep 3
	held=$(metric vigil_workers_by_state)
	echo "N=$n: registered RSS $((registered / 1024)) MiB, $held workers held; waiting for every lease to expire and every worker to be deleted" >&2

	wait_deleted $(($(secs "$LEASE") + 900))
	echo "N=$n: all deleted; settling $SETTLE" >&2
	settle_end=$((SECONDS + $(secs "$SETTLE")))
	while [ $SECONDS -lt $settle_end ]; do
		memstats "settling, $((settle_end - SECONDS)) s left"
		sleep $((settle_end - SECONDS < 30 ? settle_end - SECONDS : 30))
	done
	after=$(rss_kib $pid)
	read -r after_heap after_rt < <(runtime_split)
	memstats after
	heap "$dir/heap-after.pb.gz"
	alloc=$(heap_alloc_mib)
	kill $pid
	wait $pid 2>/dev/null || true
	trap - EXIT

	awk -v n="$held" -v i="$idle" -v r="$registered" -v a="$after" -v h="$alloc" -v il="$idle_live" -v rl="$registered_live" \
		-v ah="$after_heap" -v ar="$after_rt" 'BEGIN {
		printf "%-8d %9.1f %15.1f %11.2f %17.2f %10.1f %15.1f %11.2f %9.1f %7.1f %10.1f\n", n, i/1024, r/1024, (r-i)/n, (rl-il)*1024/n, a/1024, h, a/i, ah/1024, ar/1024, (a-ah-ar)/1024
	}' | tee -a "$summary"
done
echo "logs, heap profiles and $summary in $OUT" >&2
