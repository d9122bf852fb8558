#!/usr/bin/env bash
# breakdown.sh DIR RPC_PER_S: the server's CPU per heartbeat RPC by component, in µs, from
# DIR/server.cpu.pprof (30 s) taken while the bench ran at RPC_PER_S. Components overlap where
# one runs inside another (e.g. newstack, GC assist, validation inside interceptors).
set -euo pipefail
cd "$(dirname "$0")"
dir=$1 rps=$2
top=$(go tool pprof -top -cum -nodecount=5000 ../../../bin/vigil "$dir/server.cpu.pprof" 2>/dev/null)
total=$(echo "$top" | sed -n 's/.*Total samples = \([0-9.]*\)\(m\?s\).*/\1 \2/p')
cum() { echo "$top" | awk -v f="$1" '$6==f {v=$4; if (v ~ /ms$/) {sub(/ms$/,"",v); v/=1000} else sub(/s$/,"",v); print v; exit}'; }
us() { awk -v s="${1:-0}" -v r="$rps" 'BEGIN{printf "%6.1f", s/(r*30)*1e6}'; }
read -r t unit <<<"$total"; [[ $unit == ms ]] && t=$(awk -v t="$t" 'BEGIN{print t/1000}')
row() { printf "| %-58s | %s |\n" "$1" "$(us "$2")"; }
g() { cum "$1"; }
d() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN{print a-b}'; }
echo "| component (server, µs CPU per RPC at $rps RPC/s) | µs |"
echo "|---|---|"
row "total" "$t"
row "gRPC transport: reading frames (HandleStreams)" "$(g 'google.golang.org/grpc/internal/transport.(*http2Server).HandleStreams')"
row "gRPC transport: writing (loopyWriter)" "$(g 'google.golang.org/grpc/internal/transport.(*loopyWriter).run')"
row "gRPC per call outside the handler (processRPC - handler)" "$(d "$(g 'google.golang.org/grpc.(*Server).processRPC')" "$(g 'go.temporal.io/api/workflowservice/v1._WorkflowService_RecordWorkerHeartbeat_Handler')")"
row "protobuf unmarshal of the public request" "$(g 'google.golang.org/protobuf/proto.Unmarshal')"
row "interceptors (all, incl. validation)" "$(d "$(g 'github.com/vigilhq/vigil/frontend.(*Server).readinessInterceptor')" "$(g 'github.com/vigilhq/vigil/frontend.(*WorkflowHandler).RecordWorkerHeartbeat')")"
row "  of which validation" "$(g 'github.com/vigilhq/vigil/frontend.(*validator).validate')"
row "frontend handler outside history" "$(d "$(g 'github.com/vigilhq/vigil/frontend.(*WorkflowHandler).RecordWorkerHeartbeat')" "$(g 'github.com/vigilhq/vigil/history.(*shardConn).Invoke')")"
row "frontend→history hop (shardConn+LocalConn, copies)" "$(d "$(g 'github.com/vigilhq/vigil/history.(*shardConn).Invoke')" "$(g 'github.com/vigilhq/vigil/chasm/worker.(*Handler).RecordHeartbeats')")"
row "worker handler outside the engine (incl. admission)" "$(d "$(g 'github.com/vigilhq/vigil/chasm/worker.(*Handler).RecordHeartbeats')" "$(g 'github.com/vigilhq/vigil/history.(*Engine).UpdateWithStart')")"
row "  of which history admission (Admission.Admit)" "$(g 'github.com/vigilhq/vigil/history.(*Admission).Admit')"
row "engine (lock, cache, apply, clone, marshal)" "$(g 'github.com/vigilhq/vigil/history.(*Engine).UpdateWithStart')"
row "group commit + SQLite (own goroutine)" "$(g 'github.com/vigilhq/vigil/persistence.(*GroupCommitter).commit')"
row "GC background marking" "$(g 'runtime.gcBgMarkWorker')"
row "stack growth (runtime.newstack, inside the above)" "$(g 'runtime.newstack')"
row "malloc (inside the above)" "$(g 'runtime.mallocgc')"
