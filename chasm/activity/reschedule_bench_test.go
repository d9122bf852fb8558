package activity_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	commonpb "go.temporal.io/api/common/v1"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/shard"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/history/historytest"
	"github.com/vigilhq/vigil/tasks"
)

// BenchmarkRescheduleActivities measures the receiving side of a lost worker's reschedule:
// activity.Handler.RescheduleActivities taking back 10,000 STARTED attempts of one worker, on a
// real history host (SQLite in b.TempDir(), binds and unbinds over the history RPC), each
// entry its own durable transaction. The handler is built as the server builds it, with the
// Dispatcher: each transaction records the new attempt's dispatch, and the handler queues it in
// matching as soon as that transaction commits (no DispatchTask per attempt).
//
//	go test -run '^$' -bench BenchmarkRescheduleActivities -benchtime 1x -timeout 20m ./chasm/activity/
//
// Every iteration gets fresh attempts, built with the timer stopped: 10,000 started
// activities, dispatched, started by one ACTIVE worker and bound to it. Only the reschedule
// call is timed. After it, with the timer stopped again, the benchmark waits until every new
// attempt is in matching (already the case when the call returns) and for the tail the call
// leaves to the outbound queues (10,000 CancelActivity commands to the lost worker, each
// delivered and then recorded by a write of its own), so that one iteration's tail does not
// load the next one's measurement.
//
//   - one-request: the whole batch in one request.
//   - per-shard:   what the Worker component sends: one request per destination shard, in
//     chunks of worker.RescheduleChunkSizeDefault, at most
//     tasks.OutboundQueueDestinationConcurrencyDefault chunks of a shard at a time, every
//     shard at once.
//
// Metrics: activities/s, batch-ms (time of the whole batch), redispatched-ms (from the moment
// the worker is INACTIVE, just before the call, until the last new attempt reached matching:
// "every new attempt in matching after INACTIVE"; not part of ns/op). The iteration log line
// names the same figure "last new attempt in matching after".
func BenchmarkRescheduleActivities(b *testing.B) {
	const batch = 10_000
	b.Run("one-request", func(b *testing.B) {
		benchmarkReschedule(b, batch, func(h *activity.Handler, workerKey string, entries []*workerpb.BoundActivity, inactive time.Time) error {
			resp, err := h.RescheduleActivities(context.Background(), &workerpb.RescheduleActivitiesRequest{
				NamespaceId: benchNamespaceID, ShardId: 1, WorkerInstanceKey: workerKey,
				Activities: entries, InactiveTime: timestamppb.New(inactive),
			})
			if err != nil {
				return err
			}
			return requireAllRescheduled(resp)
		})
	})
	b.Run("per-shard", func(b *testing.B) {
		benchmarkReschedule(b, batch, reschedulePerShard)
	})
}

const (
	benchNamespaceID = "bench-ns-id"
	benchNamespace   = "bench-ns"
	benchNumShards   = 4
	// benchSetupConcurrency is how many starts and task starts the setup runs at once.
	benchSetupConcurrency = 64
)

type rescheduleFunc func(h *activity.Handler, workerKey string, entries []*workerpb.BoundActivity, inactive time.Time) error

func benchmarkReschedule(b *testing.B, batch int, reschedule rescheduleFunc) {
	b.StopTimer()
	h := startRescheduleBenchHost(b)
	var redispatched time.Duration
	iterations := 0
	for range b.N {
		iterations++
		workerKey := fmt.Sprintf("bench-worker-%d", iterations)
		setupStart := time.Now()
		entries := h.startedAttempts(b, iterations, workerKey, batch)
		inactive := time.Now()
		setup := inactive.Sub(setupStart)

		b.StartTimer()
		if err := reschedule(h.activities, workerKey, entries, inactive); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		called := time.Since(inactive)

		h.waitFor(b, "every rescheduled attempt to reach matching", func() bool { return h.dispatcher.count(2) == iterations*batch })
		redispatched += h.dispatcher.lastAt(2).Sub(inactive)
		h.waitFor(b, "every CancelActivity command to the lost worker", func() bool { return h.sender.count() == iterations*batch })
		// No unbinds to wait for: a lost worker's attempts are not unbound one by one (the worker
		// drops its bindings itself when it becomes INACTIVE). The worker here stays ACTIVE, so
		// drop its bindings as that transition would, to start the next iteration clean.
		h.dropBindings(b, workerKey)
		b.Logf("iteration %d: setup %v, call %v, last new attempt in matching after %v, tail done after %v",
			iterations, setup.Round(time.Millisecond), called.Round(time.Millisecond),
			h.dispatcher.lastAt(2).Sub(inactive).Round(time.Millisecond), time.Since(inactive).Round(time.Millisecond))
	}
	elapsed := b.Elapsed()
	if elapsed > 0 {
		b.ReportMetric(float64(batch*b.N)/elapsed.Seconds(), "activities/s")
		b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "batch-ms")
		b.ReportMetric(float64(redispatched.Milliseconds())/float64(b.N), "redispatched-ms")
	}
}

// reschedulePerShard sends the batch as the Worker component's ActivityRescheduleTasks do.
func reschedulePerShard(h *activity.Handler, workerKey string, entries []*workerpb.BoundActivity, inactive time.Time) error {
	byShard := map[int32][]*workerpb.BoundActivity{}
	for _, e := range entries {
		s := shard.ForKey(e.GetNamespaceId(), e.GetActivityId(), benchNumShards)
		byShard[s] = append(byShard[s], e)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for shardID, shardEntries := range byShard {
		sem := make(chan struct{}, tasks.OutboundQueueDestinationConcurrencyDefault)
		for len(shardEntries) > 0 {
			n := min(worker.RescheduleChunkSizeDefault, len(shardEntries))
			chunk := shardEntries[:n]
			shardEntries = shardEntries[n:]
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				resp, err := h.RescheduleActivities(context.Background(), &workerpb.RescheduleActivitiesRequest{
					NamespaceId: benchNamespaceID, ShardId: shardID, WorkerInstanceKey: workerKey,
					Activities: chunk, InactiveTime: timestamppb.New(inactive),
				})
				if err == nil {
					err = requireAllRescheduled(resp)
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return firstErr
}

func requireAllRescheduled(resp *workerpb.RescheduleActivitiesResponse) error {
	for i, o := range resp.GetOutcomes() {
		if o != workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_RESCHEDULED {
			return fmt.Errorf("entry %d: outcome %v, want RESCHEDULED", i, o)
		}
	}
	return nil
}

// rescheduleBenchHost is the Activity and Worker components on one history host, wired as the
// server wires them; matching and worker commands are counters.
type rescheduleBenchHost struct {
	host       *historytest.Host
	activities *activity.Handler
	workers    *worker.Handler
	dispatcher *countingDispatcher
	sender     *countingSender
}

func startRescheduleBenchHost(b *testing.B) *rescheduleBenchHost {
	b.Helper()
	logger := zaptest.NewLogger(b, zaptest.Level(zap.WarnLevel))
	dcClient := dynamicconfig.NewMemoryClient()
	// Nothing may fire by itself while the benchmark runs: no re-dispatch of waiting attempts.
	dcClient.OverrideValue(activity.RedispatchInterval.Key(), "1h")
	dc := dynamicconfig.NewCollection(dcClient, logger)
	membership := &history.LocalMembership{}
	router := history.NewRouter(benchNumShards, membership)
	b.Cleanup(func() { _ = router.Close() })

	h := &rescheduleBenchHost{dispatcher: newCountingDispatcher(), sender: newCountingSender()}
	activityConfig := activity.NewConfig(dc, benchNumShards)
	workerConfig := worker.NewConfig(dc, benchNumShards)
	libs := []chasm.Library{
		activity.NewLibrary(activityConfig, h.dispatcher, &activity.RemoteWorkerBinder{Router: router}, h.sender, tally.NoopScope, logger),
		worker.NewLibrary(workerConfig, &worker.RemoteRescheduler{Router: router}, tally.NoopScope, logger),
	}
	h.host = historytest.Start(b, historytest.Options{
		NumShards: benchNumShards, Libraries: libs, DynamicConfig: dcClient, Logger: logger,
		Services: func(e *history.Engine) []history.ServiceRegistration {
			h.activities = activity.NewHandler(e, activityConfig, tally.NoopScope, logger, activity.WithDispatcher(h.dispatcher))
			h.workers = worker.NewHandler(e, workerConfig, clock.NewRealTimeSource(), tally.NoopScope, logger)
			return []history.ServiceRegistration{func(s grpc.ServiceRegistrar) {
				activitypb.RegisterActivityHistoryServiceServer(s, h.activities)
				workerpb.RegisterWorkerHistoryServiceServer(s, h.workers)
				workerpb.RegisterActivityReschedulerServiceServer(s, worker.NewRescheduleServer(h.activities))
			}}
		},
	})
	membership.SetAddress(h.host.Server.Address())
	return h
}

// startedAttempts registers workerKey (ACTIVE, 10m lease), starts n activities, waits for
// their dispatch, starts every attempt on workerKey and waits until all are bound to it. It
// returns the reschedule entries of those attempts.
func (h *rescheduleBenchHost) startedAttempts(b *testing.B, iteration int, workerKey string, n int) []*workerpb.BoundActivity {
	b.Helper()
	ctx := context.Background()
	resp, err := h.workers.RecordHeartbeats(ctx, &workerpb.RecordHeartbeatsRequest{
		NamespaceId: benchNamespaceID, Namespace: benchNamespace,
		Heartbeats: []*workerpb.HeartbeatEntry{{
			Heartbeat:     &workerv1.WorkerHeartbeat{WorkerInstanceKey: workerKey, TaskQueue: "orders"},
			LeaseDuration: durationpb.New(10 * time.Minute), // worker.maxLeaseDuration: it outlives the benchmark
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if e := resp.GetResults()[0].GetError(); e != nil {
		b.Fatalf("register %s: %s", workerKey, e.GetMessage())
	}

	entries := make([]*workerpb.BoundActivity, n)
	parallel(b, n, func(i int) error {
		id := fmt.Sprintf("it%d-act-%05d", iteration, i)
		resp, err := h.activities.StartActivity(ctx, &activitypb.StartActivityRequest{
			NamespaceId: benchNamespaceID, Namespace: benchNamespace, ActivityId: id,
			ActivityType: &commonpb.ActivityType{Name: "Charge"}, TaskQueue: "orders",
			StartToCloseTimeout: durationpb.New(time.Hour), RequestId: "req-" + id,
		})
		if err != nil {
			return err
		}
		entries[i] = &workerpb.BoundActivity{NamespaceId: benchNamespaceID, ActivityId: id, RunId: resp.GetRunId(), Stamp: 1}
		return nil
	})
	h.waitFor(b, "every first attempt to reach matching", func() bool { return h.dispatcher.count(1) == iteration*n })

	parallel(b, n, func(i int) error {
		e := entries[i]
		_, err := h.activities.RecordActivityTaskStarted(ctx, &activitypb.RecordActivityTaskStartedRequest{
			NamespaceId: benchNamespaceID, ActivityId: e.ActivityId, RunId: e.RunId, Stamp: e.Stamp,
			Identity: "1@bench-host", WorkerInstanceKey: workerKey, PollRequestId: "poll-" + e.ActivityId,
			WorkerControlTaskQueue: "temporal-sys/worker-commands/bench-ns/bench-group",
		})
		return err
	})
	h.waitFor(b, "every attempt to be bound to its worker", func() bool { return h.boundCount(b, workerKey) == n })
	return entries
}

func (h *rescheduleBenchHost) boundCount(b *testing.B, workerKey string) int {
	resp, err := h.workers.DescribeWorker(context.Background(), &workerpb.DescribeWorkerRequest{
		NamespaceId: benchNamespaceID, WorkerInstanceKey: workerKey,
	})
	if err != nil {
		b.Fatal(err)
	}
	return int(resp.GetWorker().GetState().GetBoundActivityCount())
}

func (h *rescheduleBenchHost) waitFor(b *testing.B, what string, done func() bool) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !done() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// parallel runs fn(0..n-1) on benchSetupConcurrency goroutines and fails on the first error.
func parallel(b *testing.B, n int, fn func(i int) error) {
	b.Helper()
	next := make(chan int)
	errs := make(chan error, benchSetupConcurrency)
	var wg sync.WaitGroup
	for range benchSetupConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range n {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			b.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// countingDispatcher counts distinct (activity, stamp) dispatches per stamp and remembers when
// the last one of each stamp arrived.
type countingDispatcher struct {
	mu     sync.Mutex
	seen   map[string]struct{}
	counts map[int64]int
	last   map[int64]time.Time
}

func newCountingDispatcher() *countingDispatcher {
	return &countingDispatcher{seen: map[string]struct{}{}, counts: map[int64]int{}, last: map[int64]time.Time{}}
}

func (d *countingDispatcher) AddActivityTask(_ context.Context, ref activity.ActivityTaskRef) error {
	key := fmt.Sprintf("%s/%s/%d", ref.ActivityID, ref.RunID, ref.Stamp)
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, dup := d.seen[key]; !dup {
		d.seen[key] = struct{}{}
		d.counts[ref.Stamp]++
		d.last[ref.Stamp] = time.Now()
	}
	return nil
}

func (d *countingDispatcher) count(stamp int64) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts[stamp]
}

func (d *countingDispatcher) lastAt(stamp int64) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last[stamp]
}

// countingSender counts distinct CancelActivity commands (by task token).
type countingSender struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

func newCountingSender() *countingSender { return &countingSender{seen: map[string]struct{}{}} }

func (s *countingSender) SendCancelActivity(_ context.Context, _, _ string, token []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[string(token)] = struct{}{}
	return nil
}

func (s *countingSender) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// dropBindings unbinds everything bound to the worker in one call.
func (h *rescheduleBenchHost) dropBindings(b *testing.B, workerKey string) {
	resp, err := h.workers.DescribeWorker(context.Background(), &workerpb.DescribeWorkerRequest{
		NamespaceId: benchNamespaceID, WorkerInstanceKey: workerKey, IncludeBoundActivities: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	var unbound []*workerpb.ActivityBinding
	for _, a := range resp.GetWorker().GetBoundActivities() {
		unbound = append(unbound, &workerpb.ActivityBinding{ActivityId: a.GetActivityId(), RunId: a.GetRunId(), Stamp: a.GetStamp()})
	}
	if _, err := h.workers.UpdateBindings(context.Background(), &workerpb.UpdateBindingsRequest{
		NamespaceId: benchNamespaceID, WorkerInstanceKey: workerKey, Unbound: unbound,
	}); err != nil {
		b.Fatal(err)
	}
}
