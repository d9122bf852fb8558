package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm/chasmtest"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/dynamicconfig"
)

const (
	testNamespaceID = "ns-id-1"
	testNamespace   = "ns-one"
	testNumShards   = 8
)

// recordingRescheduler records batches; tests decide what it answers.
type recordingRescheduler struct {
	mu         sync.Mutex
	requests   []*workerpb.RescheduleActivitiesRequest
	failWith   error
	failShards map[int32]error // per destination shard, checked after failWith
}

func (r *recordingRescheduler) RescheduleActivities(_ context.Context, req *workerpb.RescheduleActivitiesRequest) (*workerpb.RescheduleActivitiesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failWith != nil {
		return nil, r.failWith
	}
	if err := r.failShards[req.ShardId]; err != nil {
		return nil, err
	}
	r.requests = append(r.requests, req)
	return worker.NotFoundRescheduler{}.RescheduleActivities(context.Background(), req)
}

func (r *recordingRescheduler) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failWith = err
}

// failShard makes the calls to one destination shard fail with err (nil: answer again).
func (r *recordingRescheduler) failShard(shardID int32, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failShards == nil {
		r.failShards = make(map[int32]error)
	}
	r.failShards[shardID] = err
}

func (r *recordingRescheduler) received() []*workerpb.RescheduleActivitiesRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*workerpb.RescheduleActivitiesRequest(nil), r.requests...)
}

type bundle struct {
	t           *testing.T
	engine      *chasmtest.Engine
	handler     *worker.Handler
	rescheduler *recordingRescheduler
	dc          *dynamicconfig.MemoryClient
	config      *worker.Config
	ctx         context.Context
	// useDefaultLease removes setup's 30 s worker.defaultLeaseDuration.
	useDefaultLease func()
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupWith(t)
}

// setupWith is setup with options for the library.
func setupWith(t *testing.T, opts ...worker.LibraryOption) *bundle {
	t.Helper()
	dcClient := dynamicconfig.NewMemoryClient()
	// The tests were written around 30 s first leases (shorter than the built-in default, which
	// covers the SDK's 60 s interval); useDefaultLease restores the built-in one.
	useDefaultLease := dcClient.OverrideValue(dynamicconfig.DefaultLeaseDuration.Key(), "30s")
	logger := zaptest.NewLogger(t)
	config := worker.NewConfig(dynamicconfig.NewCollection(dcClient, logger), testNumShards)
	rescheduler := &recordingRescheduler{}
	lib := worker.NewLibrary(config, rescheduler, tally.NoopScope, logger, opts...)
	engine := chasmtest.NewEngine(t, chasmtest.NewRegistry(t, lib))
	return &bundle{
		t:           t,
		engine:      engine,
		handler:     worker.NewHandler(engine, config, engine.Clock(), tally.NoopScope, logger),
		rescheduler: rescheduler,
		dc:          dcClient,
		config:      config,
		ctx:         context.Background(),

		useDefaultLease: useDefaultLease,
	}
}

func heartbeat(key string) *workerv1.WorkerHeartbeat {
	return &workerv1.WorkerHeartbeat{
		WorkerInstanceKey: key,
		WorkerIdentity:    "123@host-a",
		TaskQueue:         "orders",
		HostInfo:          &workerv1.WorkerHostInfo{HostName: "host-a"},
	}
}

type hbOption func(*workerpb.HeartbeatEntry)

func withLease(d time.Duration) hbOption {
	return func(e *workerpb.HeartbeatEntry) { e.LeaseDuration = durationpb.New(d) }
}

func withToken(token int64) hbOption {
	return func(e *workerpb.HeartbeatEntry) { e.ConflictToken = proto.Int64(token) }
}

func withBound(bs ...*workerpb.ActivityBinding) hbOption {
	return func(e *workerpb.HeartbeatEntry) { e.Bound = append(e.Bound, bs...) }
}

func withUnbound(bs ...*workerpb.ActivityBinding) hbOption {
	return func(e *workerpb.HeartbeatEntry) { e.Unbound = append(e.Unbound, bs...) }
}

func withElapsed(d time.Duration) hbOption {
	return func(e *workerpb.HeartbeatEntry) { e.Heartbeat.ElapsedSinceLastHeartbeat = durationpb.New(d) }
}

// withSentAt sets the time the SDK sent the heartbeat, by its own clock (heartbeat_time).
func withSentAt(at time.Time) hbOption {
	return func(e *workerpb.HeartbeatEntry) { e.Heartbeat.HeartbeatTime = timestamppb.New(at) }
}

func binding(activityID string, stamp int64) *workerpb.ActivityBinding {
	return &workerpb.ActivityBinding{ActivityId: activityID, RunId: "run-" + activityID, Stamp: stamp}
}

// beat sends one heartbeat and returns its result (which may carry an error).
func (b *bundle) beat(key string, opts ...hbOption) *workerpb.HeartbeatResult {
	b.t.Helper()
	entry := &workerpb.HeartbeatEntry{Heartbeat: heartbeat(key)}
	for _, opt := range opts {
		opt(entry)
	}
	resp, err := b.handler.RecordHeartbeats(b.ctx, &workerpb.RecordHeartbeatsRequest{
		NamespaceId: testNamespaceID, Namespace: testNamespace, Heartbeats: []*workerpb.HeartbeatEntry{entry},
	})
	require.NoError(b.t, err)
	require.Len(b.t, resp.Results, 1)
	return resp.Results[0]
}

// mustBeat sends a heartbeat that must succeed.
func (b *bundle) mustBeat(key string, opts ...hbOption) *workerpb.HeartbeatResult {
	b.t.Helper()
	r := b.beat(key, opts...)
	require.Nil(b.t, r.Error, "heartbeat failed: %v", r.Error)
	return r
}

func (b *bundle) describe(key string) *workerpb.WorkerRecord {
	b.t.Helper()
	resp, err := b.handler.DescribeWorker(b.ctx, &workerpb.DescribeWorkerRequest{
		NamespaceId: testNamespaceID, WorkerInstanceKey: key, IncludeBoundActivities: true,
	})
	require.NoError(b.t, err)
	return resp.Worker
}

func (b *bundle) status(key string) workerpb.WorkerStatus {
	b.t.Helper()
	return b.describe(key).State.Status
}

func (b *bundle) shutdown(key string) *workerpb.ShutdownWorkerResponse {
	b.t.Helper()
	resp, err := b.handler.ShutdownWorker(b.ctx, &workerpb.ShutdownWorkerRequest{
		NamespaceId: testNamespaceID, Namespace: testNamespace, WorkerInstanceKey: key, Reason: "graceful shutdown",
	})
	require.NoError(b.t, err)
	return resp
}
