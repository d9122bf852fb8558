package frontend

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/grpc/stats"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/internal/heaptest"
)

// discardReporter accepts every report and keeps none.
type discardReporter struct{}

func (discardReporter) ShardFor(_, key string) int32 { return int32(len(key) % 16) }

func (discardReporter) ReportConnections(_ context.Context, req *workerpb.ReportConnectionsRequest) (*workerpb.ReportConnectionsResponse, error) {
	return &workerpb.ReportConnectionsResponse{Errors: make([]*workerpb.EntryError, len(req.GetReports()))}, nil
}

// BenchmarkConnTrackerMemoryPerWorker is the heap connection tracking holds for each worker of
// an SDK fleet of 100,000 that has polled or heartbeat: on a connection of its own (one worker
// per SDK process), or 100 to a connection. Each key is a string of its own, as decoded from a
// request.
func BenchmarkConnTrackerMemoryPerWorker(b *testing.B) {
	const workers = 100_000
	for _, perConn := range []int{1, 100} {
		b.Run(fmt.Sprintf("workers-per-conn=%d", perConn), func(b *testing.B) {
			for b.Loop() {
				tr := newConnTracker(discardReporter{}, namespace.MustNewRegistry(), zap.NewNop())
				conns := make([]context.Context, workers/perConn)
				before := heaptest.Live()
				for i := range conns {
					conns[i] = tr.TagConn(context.Background(), &stats.ConnTagInfo{})
				}
				for w := range workers {
					tr.seen(conns[w/perConn], "default", fmt.Sprintf("1b4e28ba-2fa1-11d2-883f-%012d", w))
				}
				// The reports of new workers are sent in rounds; wait for the last one.
				for {
					tr.reporter.mu.Lock()
					n := len(tr.reporter.pending)
					tr.reporter.mu.Unlock()
					if n == 0 {
						break
					}
					runtime.Gosched()
				}
				b.ReportMetric(float64(heaptest.Live()-before)/workers, "B/worker")
				runtime.KeepAlive(conns)
				tr.stop()
			}
		})
	}
}

// BenchmarkConnTrackerSeen is what every heartbeat and poll of a known worker pays for
// connection tracking: finding that its connection already carries it (2,000 workers, 4 to a
// connection).
func BenchmarkConnTrackerSeen(b *testing.B) {
	const workers, perConn = 2000, 4
	tr := newConnTracker(discardReporter{}, namespace.MustNewRegistry(), zap.NewNop())
	defer tr.stop()
	conns := make([]context.Context, workers/perConn)
	for i := range conns {
		conns[i] = tr.TagConn(context.Background(), &stats.ConnTagInfo{})
	}
	keys := make([]string, workers)
	for w := range keys {
		keys[w] = fmt.Sprintf("1b4e28ba-2fa1-11d2-883f-%012d", w)
		tr.seen(conns[w/perConn], "default", keys[w])
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w := i % workers
		tr.seen(conns[w/perConn], "default", keys[w])
	}
}
