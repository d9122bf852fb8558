package worker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/shard"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/history/historytest"
	"github.com/vigilhq/vigil/persistence"
)

// hostBundle is the worker component on a real history host (SQLite file, real clock), with
// reschedule batches travelling over the history RPC to a recording receiver.
type hostBundle struct {
	t        *testing.T
	host     *historytest.Host
	handler  *worker.Handler
	receiver *recordingRescheduler
	dcFile   string
	dcClient *dynamicconfig.FileClient
	writes   *writeRecorder
	config   *worker.Config
}

const hostNumShards = 4

func startHost(t *testing.T, dcYAML string) *hostBundle {
	t.Helper()
	return startHostCached(t, dcYAML, 0)
}

// startHostCached is startHost with at most cacheDecoded executions kept decoded per shard
// (0: the default).
func startHostCached(t *testing.T, dcYAML string, cacheDecoded int) *hostBundle {
	t.Helper()
	return startHostWithCache(t, dcYAML, 0, cacheDecoded)
}

// startHostWithCache is startHost with at most cacheSize business IDs cached per shard, of which
// cacheDecoded are kept decoded (0: the defaults).
func startHostWithCache(t *testing.T, dcYAML string, cacheSize, cacheDecoded int) *hostBundle {
	t.Helper()
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	dcFile := filepath.Join(t.TempDir(), "dynamicconfig.yaml")
	require.NoError(t, os.WriteFile(dcFile, []byte(dcYAML), 0o600))
	dcClient, err := dynamicconfig.NewFileClient(dynamicconfig.FileClientConfig{Filepath: dcFile, PollInterval: time.Hour},
		logger, clock.NewRealTimeSource())
	require.NoError(t, err)
	dc := dynamicconfig.NewCollection(dcClient, logger)

	config := worker.NewConfig(dc, hostNumShards)
	membership := &history.LocalMembership{}
	router := history.NewRouter(hostNumShards, membership)
	t.Cleanup(func() { _ = router.Close() })
	receiver := &recordingRescheduler{}
	writes := &writeRecorder{}
	lib := worker.NewLibrary(config, &worker.RemoteRescheduler{Router: router}, tally.NoopScope, logger)

	var handler *worker.Handler
	host := historytest.Start(t, historytest.Options{
		NumShards:        hostNumShards,
		Libraries:        []chasm.Library{lib},
		DynamicConfig:    dcClient,
		Logger:           logger,
		WrapStore:        writes.wrap,
		CacheSize:        cacheSize,
		CacheDecodedSize: cacheDecoded,
		Services: func(e *history.Engine) []history.ServiceRegistration {
			handler = worker.NewHandler(e, config, clock.NewRealTimeSource(), tally.NoopScope, logger)
			return []history.ServiceRegistration{func(s grpc.ServiceRegistrar) {
				workerpb.RegisterWorkerHistoryServiceServer(s, handler)
				workerpb.RegisterActivityReschedulerServiceServer(s, worker.NewRescheduleServer(receiver))
			}}
		},
	})
	membership.SetAddress(host.Server.Address())
	return &hostBundle{t: t, host: host, handler: handler, receiver: receiver, dcFile: dcFile, dcClient: dcClient, writes: writes, config: config}
}

func (b *hostBundle) beat(namespace, key string, opts ...hbOption) *workerpb.HeartbeatResult {
	b.t.Helper()
	entry := &workerpb.HeartbeatEntry{Heartbeat: heartbeat(key)}
	for _, opt := range opts {
		opt(entry)
	}
	resp, err := b.handler.RecordHeartbeats(context.Background(), &workerpb.RecordHeartbeatsRequest{
		NamespaceId: namespace + "-id", Namespace: namespace, Heartbeats: []*workerpb.HeartbeatEntry{entry},
	})
	require.NoError(b.t, err)
	require.Nil(b.t, resp.Results[0].Error)
	return resp.Results[0]
}

func (b *hostBundle) shutdown(namespace, key string) {
	b.t.Helper()
	_, err := b.handler.ShutdownWorker(context.Background(), &workerpb.ShutdownWorkerRequest{
		NamespaceId: namespace + "-id", Namespace: namespace, WorkerInstanceKey: key,
	})
	require.NoError(b.t, err)
}

// waitStatus long-polls the worker until it reaches status and returns its state then.
func (b *hostBundle) waitStatus(namespace, key string, status workerpb.WorkerStatus) *workerpb.WorkerState {
	b.t.Helper()
	ref, err := chasm.NewRef[*worker.Worker](b.host.Engine, chasm.ExecutionKey{NamespaceID: namespace + "-id", BusinessID: key})
	require.NoError(b.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state, err := chasm.PollComponent(ctx, b.host.Engine, ref, func(_ chasm.Context, w *worker.Worker) (*workerpb.WorkerState, bool, error) {
		return w.WorkerState, w.Status == status, nil
	})
	require.NoError(b.t, err, "worker %s never became %s", key, status)
	return state
}

func TestOnHistoryHost(t *testing.T) {
	t.Parallel()

	t.Run("LifecycleOnRealTime", func(t *testing.T) {
		t.Parallel()
		b := startHost(t, `
matching.InactiveWorkerCleanupDelay:
  - value: 1s
`)
		var bindings []*workerpb.ActivityBinding
		shards := map[int32]bool{}
		for i := range 20 {
			id := fmt.Sprintf("act-%d", i)
			bindings = append(bindings, binding(id, 1))
			shards[shard.ForKey("ns-id", id, hostNumShards)] = true
		}
		require.Greater(t, len(shards), 1)

		r := b.beat("ns", "w1", withLease(300*time.Millisecond), withBound(bindings...))
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, r.Status)

		state := b.waitStatus("ns", "w1", workerpb.WorkerStatus_WORKER_STATUS_INACTIVE)
		lag := state.InactiveTime.AsTime().Sub(r.LeaseDeadline.AsTime())
		require.GreaterOrEqual(t, lag, time.Duration(0), "never before the deadline")
		t.Logf("INACTIVE %v after the lease deadline", lag)

		require.Eventually(t, func() bool { return len(b.receiver.received()) == len(shards) }, 10*time.Second, 5*time.Millisecond,
			"one reschedule batch per destination shard")
		for _, req := range b.receiver.received() {
			require.True(t, shards[req.ShardId])
		}

		// Back while INACTIVE: resurrected.
		r = b.beat("ns", "w1", withLease(300*time.Millisecond))
		require.True(t, r.Resurrected)
		// Silent again: INACTIVE, then CLEANED_UP after the configured 1s.
		b.waitStatus("ns", "w1", workerpb.WorkerStatus_WORKER_STATUS_INACTIVE)
		cleaned := b.waitStatus("ns", "w1", workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP)
		require.EqualValues(t, 1, cleaned.ResurrectionCount)
		require.Len(t, b.receiver.received(), len(shards), "the second inactivation had nothing to reschedule")
	})

	t.Run("ARestartBinding100ActivitiesWritesAFewRows", func(t *testing.T) {
		t.Parallel()
		b := startHost(t, "")
		var bindings []*workerpb.ActivityBinding
		for i := range 100 {
			bindings = append(bindings, binding(fmt.Sprintf("activity-%03d", i), 1))
		}
		b.writes.reset()
		r := b.beat("ns", "w1", withBound(bindings...))
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, r.Status)
		rows := b.writes.rowsFor("w1")
		t.Logf("registering with 100 activities: %d write(s), %d collection rows", b.writes.writesFor("w1"), rows)
		require.Positive(t, rows)
		require.LessOrEqual(t, rows, 8, "the bindings are packed, not a row each")

		b.writes.reset()
		b.shutdown("ns", "w1")
		require.LessOrEqual(t, b.writes.rowsFor("w1"), 8, "dropping them deletes as few")
		handedBack := func() map[string]bool {
			ids := map[string]bool{}
			for _, req := range b.receiver.received() {
				for _, a := range req.Activities {
					ids[a.ActivityId] = true
				}
			}
			return ids
		}
		require.Eventually(t, func() bool { return len(handedBack()) == 100 }, 10*time.Second, 5*time.Millisecond,
			"every binding was kept and handed back")
	})

	t.Run("AWorkersRescheduleBatchesAreAcknowledgedSeveralToAWrite", func(t *testing.T) {
		t.Parallel()
		b := startHost(t, "")
		b.config.RescheduleChunkSize = 10
		var bindings []*workerpb.ActivityBinding
		for i := range 400 {
			bindings = append(bindings, binding(fmt.Sprintf("activity-%03d", i), 1))
		}
		b.beat("ns", "w1", withBound(bindings...), withLease(time.Minute))

		b.writes.reset()
		b.shutdown("ns", "w1")
		ref, err := chasm.NewRef[*worker.Worker](b.host.Engine, chasm.ExecutionKey{NamespaceID: "ns-id", BusinessID: "w1"})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = chasm.PollComponent(ctx, b.host.Engine, ref, func(_ chasm.Context, w *worker.Worker) (struct{}, bool, error) {
			return struct{}{}, w.Status == workerpb.WorkerStatus_WORKER_STATUS_INACTIVE && len(w.PendingReschedules) == 0, nil
		})
		require.NoError(t, err, "every batch acknowledged")

		delivered := 0
		for _, req := range b.receiver.received() {
			delivered += len(req.Activities)
		}
		require.Equal(t, 400, delivered)
		// 40 batches to 4 shards, delivered concurrently: one write per acknowledgement would
		// be 41 writes of the worker with the shutdown's own.
		writes := b.writes.writesFor("w1")
		require.Less(t, writes, 21, "acknowledgements that arrive together are written together")
		t.Logf("shutdown and 40 acknowledgements: %d writes", writes)
	})

	t.Run("CleanedUpWorkerIsDeletedAfterItsRetention", func(t *testing.T) {
		t.Parallel()
		b := startHost(t, `
matching.InactiveWorkerCleanupDelay:
  - value: 100ms
worker.cleanedUpRetention:
  - value: 300ms
`)
		first := b.beat("ns", "w1", withLease(time.Second))
		b.shutdown("ns", "w1")
		cleaned := b.waitStatus("ns", "w1", workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP)
		require.Equal(t, 300*time.Millisecond, cleaned.DeleteTime.AsTime().Sub(cleaned.CleanupTime.AsTime()))

		// A poller of the worker learns that it is gone.
		ref, err := chasm.NewRef[*worker.Worker](b.host.Engine, chasm.ExecutionKey{NamespaceID: "ns-id", BusinessID: "w1"})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = chasm.PollComponent(ctx, b.host.Engine, ref, func(chasm.Context, *worker.Worker) (struct{}, bool, error) {
			return struct{}{}, false, nil
		})
		var notFound *serviceerror.NotFound
		require.ErrorAs(t, err, &notFound)
		_, err = b.handler.DescribeWorker(context.Background(), &workerpb.DescribeWorkerRequest{NamespaceId: "ns-id", WorkerInstanceKey: "w1"})
		require.ErrorAs(t, err, &notFound)

		// The key is free again: a heartbeat registers a new worker.
		again := b.beat("ns", "w1", withLease(time.Second))
		require.False(t, again.Resurrected)
		state := b.waitStatus("ns", "w1", workerpb.WorkerStatus_WORKER_STATUS_ACTIVE)
		require.Zero(t, state.ResurrectionCount)
		require.True(t, state.FirstHeartbeatTime.AsTime().After(first.LeaseDeadline.AsTime().Add(-time.Second)))
	})

	t.Run("DynamicConfigFileEditChangesOneNamespacesCleanupDelayWithoutRestart", func(t *testing.T) {
		t.Parallel()
		b := startHost(t, `
matching.InactiveWorkerCleanupDelay:
  - value: 1h
`)
		b.beat("fast", "w-before", withLease(time.Second))
		b.shutdown("fast", "w-before")
		before := b.waitStatus("fast", "w-before", workerpb.WorkerStatus_WORKER_STATUS_INACTIVE)
		require.Equal(t, time.Hour, before.CleanupTime.AsTime().Sub(before.InactiveTime.AsTime()))

		require.NoError(t, os.WriteFile(b.dcFile, []byte(`
matching.InactiveWorkerCleanupDelay:
  - value: 200ms
    constraints:
      namespace: fast
  - value: 1h
`), 0o600))
		require.NoError(t, b.dcClient.Reload())

		b.beat("fast", "w-fast", withLease(time.Second))
		b.beat("slow", "w-slow", withLease(time.Second))
		b.shutdown("fast", "w-fast")
		b.shutdown("slow", "w-slow")
		b.waitStatus("fast", "w-fast", workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP)
		slow := b.waitStatus("slow", "w-slow", workerpb.WorkerStatus_WORKER_STATUS_INACTIVE)
		require.Equal(t, time.Hour, slow.CleanupTime.AsTime().Sub(slow.InactiveTime.AsTime()), "other namespaces keep their delay")
	})

	t.Run("HeartbeatsWithinTheWriteIntervalAreAnsweredFromMemory", func(t *testing.T) {
		t.Parallel()
		b := startHost(t, "") // worker.heartbeatWriteInterval at its default, 10 s
		minute := withLease(time.Minute)
		first := b.beat("ns", "w-1", minute) // a registration is always written
		b.writes.reset()
		var last *workerpb.HeartbeatResult
		for range 5 { // each deadline within 10 s of the first's
			last = b.beat("ns", "w-1", minute)
		}
		require.Zero(t, b.writes.writesFor("w-1"), "plain heartbeats within the interval write nothing")
		require.Equal(t, first.ConflictToken+5, last.ConflictToken)

		// Reads and listings show the heartbeats the store does not have yet.
		resp, err := b.handler.ListWorkers(context.Background(), &workerpb.ListWorkersRequest{NamespaceId: "ns-id", PageSize: 10})
		require.NoError(t, err)
		require.Len(t, resp.Workers, 1)
		require.Equal(t, last.ConflictToken, resp.Workers[0].State.ConflictToken)
		require.Equal(t, last.LeaseDeadline.AsTime(), resp.Workers[0].State.LeaseDeadline.AsTime())

		// A deadline past the bound (here a longer lease) is written, with everything before it.
		b.beat("ns", "w-1", withLease(2*time.Minute))
		require.Equal(t, 1, b.writes.writesFor("w-1"))
	})

	t.Run("AGracefulStopWritesTheHeartbeatsAnsweredFromMemory", func(t *testing.T) {
		t.Parallel()
		// The next owner of the shards, or the same host restarted, starts from the last state
		// the host acknowledged.
		b := startHost(t, "")
		minute := withLease(time.Minute)
		b.beat("ns", "w-1", minute)
		b.beat("ns", "w-2", minute)
		var last *workerpb.HeartbeatResult
		for range 3 {
			last = b.beat("ns", "w-1", minute) // answered from memory
		}
		b.writes.reset()
		b.host.Engine.Stop()
		require.Equal(t, 1, b.writes.writesFor("w-1"), "its heartbeats answered from memory, written once")
		require.Zero(t, b.writes.writesFor("w-2"), "nothing of it was unwritten")
		st := b.writes.lastState(t, "w-1")
		require.Equal(t, last.ConflictToken, st.GetConflictToken())
		require.Equal(t, last.LeaseDeadline.AsTime(), st.GetLeaseDeadline().AsTime())
	})

	t.Run("AWorkerWithUnwrittenHeartbeatsStaysCached", func(t *testing.T) {
		t.Parallel()
		b := startHostWithCache(t, "", 1, 1) // one business ID per shard
		minute := withLease(time.Minute)
		b.beat("ns", "w-0", minute)
		acked := b.beat("ns", "w-0", minute) // answered from memory
		// Every other worker of its shard would push it out of a cache of one.
		for i := 1; i < 40; i++ {
			b.beat("ns", fmt.Sprintf("w-%d", i), minute)
		}
		resp, err := b.handler.DescribeWorker(context.Background(), &workerpb.DescribeWorkerRequest{NamespaceId: "ns-id", WorkerInstanceKey: "w-0"})
		require.NoError(t, err)
		require.Equal(t, acked.ConflictToken, resp.Worker.State.ConflictToken, "the unwritten heartbeat was not dropped")
	})

	t.Run("PlainHeartbeatWritesTheSameBytesWith0Or10000BoundActivities", func(t *testing.T) {
		t.Parallel()
		b := startHost(t, "worker.heartbeatWriteInterval:\n  - value: 0s\n") // every heartbeat written
		var bindings []*workerpb.ActivityBinding
		for i := range 10_000 {
			bindings = append(bindings, binding(fmt.Sprintf("activity-%05d", i), 1))
		}
		// The longest lease: building 10,000 bindings under -race on a loaded box can take longer
		// than the default lease, and an expiry would reschedule (and so delete) the bindings.
		long := withLease(10 * time.Minute)
		b.beat("ns", "w-zero", long)
		b.beat("ns", "w-many", long, withBound(bindings...))

		b.writes.reset()
		b.beat("ns", "w-zero", long)
		empty := b.writes.bytesFor("w-zero")
		b.beat("ns", "w-many", long)
		loaded := b.writes.bytesFor("w-many")
		require.Positive(t, empty)
		// The states differ only in the bound_activity_count varint (0 vs 10000: 2 bytes more)
		// and in the timestamps' nanosecond varints (4 or 5 bytes each); 10,000 bindings would
		// be hundreds of kilobytes.
		require.InDelta(t, empty, loaded, 16, "a plain heartbeat does not rewrite bindings")
		t.Logf("plain heartbeat writes %d bytes (0 bound) and %d bytes (10,000 bound)", empty, loaded)
	})
}

// writeRecorder counts the writes of each execution and the bytes they carry to the store.
type writeRecorder struct {
	mu     sync.Mutex
	bytes  map[string]int
	writes map[string]int
	// rows counts the collection rows put and deleted.
	rows map[string]int
	// states are the last state written of each business ID.
	states map[string][]byte
}

func (r *writeRecorder) wrap(s persistence.Store) persistence.Store {
	return &recordingStore{Store: s, r: r}
}

func (r *writeRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bytes = map[string]int{}
	r.writes = map[string]int{}
	r.rows = map[string]int{}
	r.states = map[string][]byte{}
}

// lastState is the worker state written last for businessID (nil if none).
func (r *writeRecorder) lastState(t *testing.T, businessID string) *workerpb.WorkerState {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.states[businessID]
	if !ok {
		return nil
	}
	st := &workerpb.WorkerState{}
	require.NoError(t, proto.Unmarshal(b, st))
	return st
}

func (r *writeRecorder) rowsFor(businessID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rows[businessID]
}

func (r *writeRecorder) writesFor(businessID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes[businessID]
}

func (r *writeRecorder) bytesFor(businessID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes[businessID]
}

type recordingStore struct {
	persistence.Store
	r *writeRecorder
}

func (s *recordingStore) WriteBatch(ctx context.Context, writes []*persistence.ExecutionWrite) ([]error, error) {
	s.r.mu.Lock()
	if s.r.bytes == nil {
		s.r.bytes = map[string]int{}
		s.r.writes = map[string]int{}
		s.r.rows = map[string]int{}
		s.r.states = map[string][]byte{}
	}
	for _, w := range writes {
		if w.State != nil {
			s.r.states[w.Key.BusinessID] = w.State
		}
		s.r.rows[w.Key.BusinessID] += len(w.CollectionPuts) + len(w.CollectionDeletes)
		n := len(w.State)
		for _, e := range w.CollectionPuts {
			n += len(e.Collection) + len(e.Key) + len(e.Value)
		}
		for _, k := range w.CollectionDeletes {
			n += len(k.Collection) + len(k.Key)
		}
		for _, task := range w.TimerTasks {
			n += len(task.Payload) + 16
		}
		for _, task := range w.OutboundTasks {
			n += len(task.Payload) + len(task.Destination) + 8
		}
		s.r.bytes[w.Key.BusinessID] += n
		s.r.writes[w.Key.BusinessID]++
	}
	s.r.mu.Unlock()
	return s.Store.WriteBatch(ctx, writes)
}
