package worker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/history/historytest"
)

// Heartbeat-path benchmarks: worker.Handler.RecordHeartbeats in process, through the history
// engine, to the durable commit on SQLite (one fsync per group commit). Each heartbeat asks for
// the longest lease (worker.maxLeaseDuration, 10m) so no lease expires while a benchmark runs.
//
//	go test -run '^$' -bench BenchmarkHeartbeat -benchtime 2000x ./chasm/worker/

const (
	benchNamespaceID = "bench-ns-id"
	benchNamespace   = "bench-ns"
	benchNumShards   = 4
	benchLease       = 10 * time.Minute
)

// benchHost is the worker component on a real history host: SQLite in b.TempDir(), real clock.
// Nothing leaves the host, so reschedules (none happen here) answer NOT_FOUND.
type benchHost struct {
	host    *historytest.Host
	handler *worker.Handler
}

func startBenchHost(b *testing.B) *benchHost {
	b.Helper()
	logger := zaptest.NewLogger(b, zaptest.Level(zap.WarnLevel))
	dcClient := dynamicconfig.NewMemoryClient()
	config := worker.NewConfig(dynamicconfig.NewCollection(dcClient, logger), benchNumShards)
	lib := worker.NewLibrary(config, worker.NotFoundRescheduler{}, tally.NoopScope, logger)
	host := historytest.Start(b, historytest.Options{
		NumShards: benchNumShards, Libraries: []chasm.Library{lib}, DynamicConfig: dcClient, Logger: logger,
	})
	return &benchHost{
		host:    host,
		handler: worker.NewHandler(host.Engine, config, clock.NewRealTimeSource(), tally.NoopScope, logger),
	}
}

// benchHeartbeat is the snapshot an SDK worker sends with every heartbeat (sdkHeartbeat).
func benchHeartbeat(key string) *workerv1.WorkerHeartbeat {
	hb := sdkHeartbeat(time.Now())
	hb.WorkerInstanceKey = key
	return hb
}

func benchBinding(activityID string) *workerpb.ActivityBinding {
	return &workerpb.ActivityBinding{ActivityId: activityID, RunId: "run-" + activityID, Stamp: 1}
}

// record sends one heartbeat (with optional binding deltas) and returns its failure, if any.
func (h *benchHost) record(key string, bound, unbound []*workerpb.ActivityBinding) error {
	resp, err := h.handler.RecordHeartbeats(context.Background(), &workerpb.RecordHeartbeatsRequest{
		NamespaceId: benchNamespaceID, Namespace: benchNamespace,
		Heartbeats: []*workerpb.HeartbeatEntry{{
			Heartbeat: benchHeartbeat(key), LeaseDuration: durationpb.New(benchLease), Bound: bound, Unbound: unbound,
		}},
	})
	if err != nil {
		return err
	}
	if e := resp.GetResults()[0].GetError(); e != nil {
		return fmt.Errorf("heartbeat of %s failed: code %d: %s", key, e.GetCode(), e.GetMessage())
	}
	return nil
}

// beat is record for the benchmark's own goroutine: a failure stops the benchmark.
func (h *benchHost) beat(b *testing.B, key string, bound, unbound []*workerpb.ActivityBinding) {
	if err := h.record(key, bound, unbound); err != nil {
		b.Fatal(err)
	}
}

// reportHeartbeatRate adds heartbeats/s (b.N over the timed wall-clock time).
func reportHeartbeatRate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "heartbeats/s")
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkHeartbeat(b *testing.B) {
	// An existing worker with nothing bound renews its lease.
	b.Run("plain", func(b *testing.B) {
		h := startBenchHost(b)
		h.beat(b, "w-plain", nil, nil)
		for b.Loop() {
			h.beat(b, "w-plain", nil, nil)
		}
		reportHeartbeatRate(b)
	})

	// The same with 100 activities bound: the bindings are a collection beside the state, so a
	// plain heartbeat should cost what it does with none.
	b.Run("bound-100", func(b *testing.B) {
		h := startBenchHost(b)
		bound := make([]*workerpb.ActivityBinding, 100)
		for i := range bound {
			bound[i] = benchBinding(fmt.Sprintf("act-%03d", i))
		}
		h.beat(b, "w-bound", bound, nil)
		for b.Loop() {
			h.beat(b, "w-bound", nil, nil)
		}
		reportHeartbeatRate(b)
	})

	// Every heartbeat binds a new activity and unbinds the oldest one, keeping 100 bound.
	b.Run("with-deltas", func(b *testing.B) {
		h := startBenchHost(b)
		const window = 100
		bound := make([]*workerpb.ActivityBinding, window)
		for i := range bound {
			bound[i] = benchBinding(fmt.Sprintf("act-%09d", i))
		}
		h.beat(b, "w-deltas", bound, nil)
		i := 0
		for b.Loop() {
			h.beat(b, "w-deltas",
				[]*workerpb.ActivityBinding{benchBinding(fmt.Sprintf("act-%09d", i+window))},
				[]*workerpb.ActivityBinding{benchBinding(fmt.Sprintf("act-%09d", i))})
			i++
		}
		reportHeartbeatRate(b)
	})

	// 64 workers heartbeat at once, each from its own goroutine; group commit batches them.
	b.Run("parallel-64", func(b *testing.B) {
		const workers = 64
		h := startBenchHost(b)
		for w := range workers {
			h.beat(b, fmt.Sprintf("w-par-%02d", w), nil, nil)
		}
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((workers + procs - 1) / procs) // RunParallel runs parallelism × GOMAXPROCS goroutines
		var next atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			key := fmt.Sprintf("w-par-%02d", (next.Add(1)-1)%workers)
			for pb.Next() {
				if err := h.record(key, nil, nil); err != nil {
					b.Error(err) // not Fatal: this is not the benchmark's goroutine
					return
				}
			}
		})
		b.StopTimer()
		reportHeartbeatRate(b)
	})
}

// BenchmarkRestart is a fleet restart's two calls, in process: a worker with 100 activities
// bound shuts down (ShutdownWorker) and a fresh key registers with those 100 bindings, from 64
// goroutines at once as a deploy's processes do. One op is one shutdown and one registration;
// the shutdowns' reschedules answer NOT_FOUND (nothing leaves the host).
//
//	go test -run '^$' -bench BenchmarkRestart -benchtime 2000x ./chasm/worker/
func BenchmarkRestart(b *testing.B) {
	const workers = 64
	h := startBenchHost(b)
	bound := make([]*workerpb.ActivityBinding, 100)
	for i := range bound {
		bound[i] = benchBinding(fmt.Sprintf("act-%03d", i))
	}
	var next atomic.Int64
	key := func() string { return fmt.Sprintf("w-restart-%09d", next.Add(1)) }
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((workers + procs - 1) / procs)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		k := key()
		if err := h.record(k, bound, nil); err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			_, err := h.handler.ShutdownWorker(context.Background(), &workerpb.ShutdownWorkerRequest{
				NamespaceId: benchNamespaceID, Namespace: benchNamespace, WorkerInstanceKey: k,
			})
			if err != nil {
				b.Error(err)
				return
			}
			k = key()
			if err := h.record(k, bound, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "restarts/s")
	}
}

// BenchmarkHeartbeatFleet is parallel-64 over a registered fleet of N workers. Each round of
// N heartbeats visits every worker once, in a shuffled order as a fleet's jittered timers do,
// to see whether a heartbeat costs more in a larger fleet: the pages and decoded states it
// touches are less likely to be warm.
//
// The wall time per heartbeat follows the disk (64 callers wait for each group commit's fsync)
// and swings between runs on a shared box; cpu-µs/op, the process's CPU per heartbeat, is what
// a host's capacity on one core depends on. Pin it to compare builds:
//
//	GOMAXPROCS=1 taskset -c 0 go test -run '^$' -bench BenchmarkHeartbeatFleet -benchtime 40000x ./chasm/worker/
func BenchmarkHeartbeatFleet(b *testing.B) {
	for _, fleet := range []int{1000, 5000, 20000, 100000} {
		b.Run(fmt.Sprintf("workers-%d", fleet), func(b *testing.B) {
			const goroutines = 64
			h := startBenchHost(b)
			keys := make([]string, fleet)
			for i := range keys {
				keys[i] = fmt.Sprintf("w-fleet-%06d", i)
			}
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			// beat sends n heartbeats from 64 goroutines, the i-th to keys[i % fleet].
			beat := func(n int) error {
				var next atomic.Int64
				var g errgroup.Group
				for range goroutines {
					g.Go(func() error {
						for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
							if err := h.record(keys[i%int64(fleet)], nil, nil); err != nil {
								return err
							}
						}
						return nil
					})
				}
				return g.Wait()
			}
			if err := beat(fleet); err != nil { // registrations
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu := processCPU(b)
			if err := beat(b.N); err != nil {
				b.Fatal(err)
			}
			cpu = processCPU(b) - cpu
			b.StopTimer()
			reportHeartbeatRate(b)
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
