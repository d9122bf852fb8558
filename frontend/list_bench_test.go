package frontend_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/history/historytest"
)

// BenchmarkListWorkers pages through 100,000 workers stored on a real history host (SQLite in
// b.TempDir()), 1,000 a page:
//
//	go test -run '^$' -bench BenchmarkListWorkers -benchtime 3x ./frontend/
//
// Sub-benchmarks:
//   - history/all: worker.Handler.ListWorkers, every worker.
//   - frontend/all: the public WorkflowHandler.ListWorkers without a query, history reached in
//     process (no network), every worker.
//   - frontend/filtered: the same with `TaskQueue = "tq-3"`, which 1 worker in 10 matches; the
//     frontend filters, so it still reads all 100,000 from history.
//
// The workers are created once, as setup, by heartbeats through worker.Handler in concurrent
// batches, each with a 10m lease (worker.maxLeaseDuration) so none expires while listing.
// Metrics: workers/s listed (returned to the caller) and, for the filtered query,
// workers-scanned/s.
func BenchmarkListWorkers(b *testing.B) {
	const (
		numWorkers  = 100_000
		taskQueues  = 10
		pageSize    = 1000
		filterQueue = "tq-3"
	)
	env := startListBenchEnv(b)
	started := time.Now()
	env.createWorkers(b, numWorkers, taskQueues)
	b.Logf("created %d workers in %v", numWorkers, time.Since(started).Round(time.Millisecond))

	ctx := context.Background()
	b.Run("history/all", func(b *testing.B) {
		for b.Loop() {
			var token []byte
			listed := 0
			for {
				resp, err := env.workers.ListWorkers(ctx, &workerpb.ListWorkersRequest{
					NamespaceId: env.ns.ID, PageSize: pageSize, NextPageToken: token,
				})
				if err != nil {
					b.Fatal(err)
				}
				listed += len(resp.GetWorkers())
				if token = resp.GetNextPageToken(); len(token) == 0 {
					break
				}
			}
			requireListed(b, numWorkers, listed)
		}
		reportRate(b, numWorkers, "workers/s")
	})

	frontendList := func(b *testing.B, query string) int {
		var token []byte
		listed := 0
		for {
			resp, err := env.workflow.ListWorkers(ctx, &workflowservice.ListWorkersRequest{
				Namespace: env.ns.Name, Query: query, PageSize: pageSize, NextPageToken: token,
			})
			if err != nil {
				b.Fatal(err)
			}
			listed += len(resp.GetWorkers())
			if token = resp.GetNextPageToken(); len(token) == 0 {
				return listed
			}
		}
	}
	b.Run("frontend/all", func(b *testing.B) {
		for b.Loop() {
			requireListed(b, numWorkers, frontendList(b, ""))
		}
		reportRate(b, numWorkers, "workers/s")
	})
	b.Run("frontend/filtered", func(b *testing.B) {
		query := fmt.Sprintf("TaskQueue = %q", filterQueue)
		for b.Loop() {
			requireListed(b, numWorkers/taskQueues, frontendList(b, query))
		}
		reportRate(b, numWorkers/taskQueues, "workers/s")
		reportRate(b, numWorkers, "workers-scanned/s")
	})
}

func requireListed(b *testing.B, want, got int) {
	b.Helper()
	if got != want {
		b.Fatalf("listed %d workers, want %d", got, want)
	}
}

// reportRate reports perOp units per second of timed wall-clock time.
func reportRate(b *testing.B, perOp int, unit string) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(perOp*b.N)/s, unit)
	}
}

type listBenchEnv struct {
	workers  *worker.Handler
	workflow *frontend.WorkflowHandler
	ns       *namespace.Namespace
}

func startListBenchEnv(b *testing.B) *listBenchEnv {
	b.Helper()
	const numShards = 4
	logger := zaptest.NewLogger(b, zaptest.Level(zap.WarnLevel))
	dcClient := dynamicconfig.NewMemoryClient()
	dc := dynamicconfig.NewCollection(dcClient, logger)
	config := worker.NewConfig(dc, numShards)
	// Nothing is ever rescheduled here: no worker goes INACTIVE while the benchmark runs.
	lib := worker.NewLibrary(config, worker.NotFoundRescheduler{}, tally.NoopScope, logger)
	host := historytest.Start(b, historytest.Options{
		NumShards: numShards, Libraries: []chasm.Library{lib}, DynamicConfig: dcClient, Logger: logger,
	})
	workers := worker.NewHandler(host.Engine, config, clock.NewRealTimeSource(), tally.NoopScope, logger)

	registry := namespace.MustNewRegistry()
	ns, err := registry.GetByName(namespace.DefaultName)
	if err != nil {
		b.Fatal(err)
	}
	deps := frontend.Deps{
		History:       inProcessHistory{workers: workers},
		Namespaces:    registry,
		DynamicConfig: dc,
		Logger:        logger,
	}
	return &listBenchEnv{workers: workers, workflow: frontend.NewWorkflowHandler(deps), ns: ns}
}

// createWorkers registers n workers (task queue tq-<i mod taskQueues>) through heartbeats, in
// requests of 100 heartbeats sent by 8 goroutines; the handler runs a request's heartbeats
// concurrently, so about 800 transactions are in flight.
func (e *listBenchEnv) createWorkers(b *testing.B, n, taskQueues int) {
	b.Helper()
	const (
		perRequest = 100
		senders    = 8
	)
	requests := make(chan int)
	errs := make(chan error, senders)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for first := range requests {
				req := &workerpb.RecordHeartbeatsRequest{NamespaceId: e.ns.ID, Namespace: e.ns.Name}
				for i := first; i < min(first+perRequest, n); i++ {
					key := fmt.Sprintf("worker-%06d", i)
					req.Heartbeats = append(req.Heartbeats, &workerpb.HeartbeatEntry{
						Heartbeat: &workerapipb.WorkerHeartbeat{
							WorkerInstanceKey: key,
							WorkerIdentity:    "1@host-" + key,
							TaskQueue:         fmt.Sprintf("tq-%d", i%taskQueues),
							SdkName:           "temporal-go",
							SdkVersion:        "1.38.0",
							Status:            enumspb.WORKER_STATUS_RUNNING,
							HostInfo:          &workerapipb.WorkerHostInfo{HostName: "host-" + key, ProcessId: "1"},
						},
						LeaseDuration: durationpb.New(10 * time.Minute),
					})
				}
				resp, err := e.workers.RecordHeartbeats(context.Background(), req)
				if err == nil {
					for _, r := range resp.GetResults() {
						if r.GetError() != nil {
							err = fmt.Errorf("heartbeat failed: code %d: %s", r.GetError().GetCode(), r.GetError().GetMessage())
							break
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var failed error
feed:
	for first := 0; first < n; first += perRequest {
		select {
		case requests <- first:
		case failed = <-errs:
			break feed
		}
	}
	close(requests)
	wg.Wait()
	close(errs)
	if failed == nil {
		failed = <-errs
	}
	if failed != nil {
		b.Fatal(failed)
	}
}

// inProcessHistory is a frontend.HistoryClient that calls the worker handler directly. Only
// ListWorkers is served; any other call panics on the nil embedded interface.
type inProcessHistory struct {
	frontend.HistoryClient
	workers *worker.Handler
}

func (c inProcessHistory) ListWorkers(ctx context.Context, req *workerpb.ListWorkersRequest) (*workerpb.ListWorkersResponse, error) {
	return c.workers.ListWorkers(ctx, req)
}
