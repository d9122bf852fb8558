package worker_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/chasmtest"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/dynamicconfig"
)

type recordingSink struct {
	mu      sync.Mutex
	changes []worker.Change
}

func (s *recordingSink) Publish(changes ...worker.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, changes...)
}

// take returns the changes since the last call.
func (s *recordingSink) take() []worker.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.changes
	s.changes = nil
	return out
}

func kindsOf(changes []worker.Change) []worker.ChangeKind {
	var out []worker.ChangeKind
	for _, c := range changes {
		out = append(out, c.Kind)
	}
	return out
}

// The sink sees what committed, whichever path committed it (heartbeat, timer, acknowledgement),
// and nothing of a transaction that failed.
func TestCommittedChangesReachTheSink(t *testing.T) {
	logger := zaptest.NewLogger(t)
	config := worker.NewConfig(dynamicconfig.NewCollection(dynamicconfig.NewMemoryClient(), logger), testNumShards)
	sink := &recordingSink{}
	lib := worker.NewLibrary(config, &recordingRescheduler{}, tally.NoopScope, logger).WithChangeSink(sink)
	engine := chasmtest.NewEngine(t, chasmtest.NewRegistry(t, lib))
	b := &bundle{t: t, engine: engine, handler: worker.NewHandler(engine, config, engine.Clock(), tally.NoopScope, logger), ctx: t.Context()}

	b.mustBeat("w-1", withLease(10*time.Second))
	got := sink.take()
	require.Equal(t, []worker.ChangeKind{worker.ChangeRegistered}, kindsOf(got))
	require.Equal(t, testNamespaceID, got[0].NamespaceID)
	require.Equal(t, "w-1", got[0].WorkerInstanceKey)
	require.Equal(t, "host-a", got[0].State.GetLastHeartbeat().GetHostInfo().GetHostName())
	// The bytes the commit wrote come along, for a sink that keeps the state (the live view's
	// ring): they are the state, encoded.
	written := &workerpb.WorkerState{}
	require.NoError(t, proto.Unmarshal(got[0].Encoded(), written))
	require.True(t, proto.Equal(got[0].State, written))

	require.NotNil(t, b.beat("w-1", withToken(99)).Error)
	require.Empty(t, sink.take(), "a refused heartbeat commits nothing and reports nothing")

	b.mustBeat("w-1", withLease(10*time.Second))
	got = sink.take()
	require.Equal(t, []worker.ChangeKind{worker.ChangeHeartbeat}, kindsOf(got))
	// A heartbeat answered from memory wrote nothing: its state is encoded when asked.
	written = &workerpb.WorkerState{}
	require.NoError(t, proto.Unmarshal(got[0].Encoded(), written))
	require.True(t, proto.Equal(got[0].State, written))

	b.mustBeat("w-1", withLease(10*time.Second), withBound(binding("a1", 1), binding("a2", 1)))
	require.Equal(t, []worker.ChangeKind{worker.ChangeHeartbeat}, kindsOf(sink.take()))

	_, err := b.handler.DrainWorker(b.ctx, &workerpb.DrainWorkerRequest{NamespaceId: testNamespaceID, WorkerInstanceKey: "w-1"})
	require.NoError(t, err)
	require.Equal(t, []worker.ChangeKind{worker.ChangeDrainRequested}, kindsOf(sink.take()))

	engine.AdvanceTime(11 * time.Second)
	engine.FireDueTasks()
	got = sink.take()
	require.Equal(t, []worker.ChangeKind{worker.ChangeInactive}, kindsOf(got))
	require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_LEASE_EXPIRED, got[0].State.GetInactiveReason())

	require.NoError(t, engine.RunSideEffectTasks(b.ctx))
	got = sink.take()
	var rescheduled int64
	for _, c := range got {
		require.Equal(t, worker.ChangeActivitiesRescheduled, c.Kind)
		rescheduled += c.Count
	}
	require.Equal(t, int64(2), rescheduled)

	b.mustBeat("w-1", withLease(10*time.Second))
	require.Equal(t, []worker.ChangeKind{worker.ChangeResurrected}, kindsOf(sink.take()))
}

func TestSuspicionIsAChangeTheLiveViewSees(t *testing.T) {
	key := chasm.ExecutionKey{NamespaceID: "ns", BusinessID: "w1"}
	before := &workerpb.WorkerState{Status: workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, ConflictToken: 3}
	after := proto.Clone(before).(*workerpb.WorkerState)
	after.SuspectSince, after.SuspectDeadline = timestamppb.Now(), timestamppb.Now()
	changes := worker.Changes(key, before, after, false)
	require.Len(t, changes, 1)
	require.Equal(t, worker.ChangeHeartbeat, changes[0].Kind)
	require.NotNil(t, changes[0].State.SuspectDeadline)
	require.Len(t, worker.Changes(key, after, before, false), 1, "and its clearing")
	require.Empty(t, worker.Changes(key, after, after, false))
}
