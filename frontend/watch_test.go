package frontend

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/chasm/worker/watch"
	"github.com/vigilhq/vigil/common/clock"
)

func watchedState(status workerpb.WorkerStatus, queue string) *workerpb.WorkerState {
	return &workerpb.WorkerState{Status: status, LastHeartbeat: &workerapipb.WorkerHeartbeat{
		TaskQueue: queue, HostInfo: &workerapipb.WorkerHostInfo{HostName: "m1"},
	}}
}

// watchEvents runs a watch and returns its events as they come, and a stop function.
func watchEvents(t *testing.T, h *LivenessHandler, req *livenesspb.WatchWorkersRequest) (<-chan *livenesspb.WorkerEvent, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	events, done := make(chan *livenesspb.WorkerEvent, 100), make(chan error, 1)
	go func() {
		done <- h.Watch(ctx, req, func(ev *livenesspb.WorkerEvent) error {
			events <- ev
			return nil
		})
	}()
	return events, done
}

func next(t *testing.T, events <-chan *livenesspb.WorkerEvent) (livenesspb.WorkerEventType, string) {
	t.Helper()
	ev := <-events
	return ev.GetType(), ev.GetWorker().GetWorkerInstanceKey() + ev.GetHostName()
}

func TestWatchSnapshotThenFilteredChanges(t *testing.T) {
	env := newTestEnv(t)
	hub := watch.NewHub(watch.Options{TimeSource: clock.NewFakeTimeSource()})
	env.deps.Watch = hub
	h := NewLivenessHandler(env.deps)
	env.history.EXPECT().ListWorkers(gomock.Any(), gomock.Any()).Return(&workerpb.ListWorkersResponse{Workers: []*workerpb.WorkerRecord{
		{WorkerInstanceKey: "w-1", State: watchedState(workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, "orders")},
		{WorkerInstanceKey: "w-2", State: watchedState(workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, "billing")},
		{WorkerInstanceKey: "w-9", State: watchedState(workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, "orders")},
	}}, nil)

	events, _ := watchEvents(t, h, &livenesspb.WatchWorkersRequest{Namespace: testNamespace, Query: `TaskQueue = "orders" AND Status = "Running"`})
	typ, key := next(t, events)
	require.Equal(t, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT, typ)
	require.Equal(t, "w-1m1", key, "only the matching worker; CLEANED_UP ones are not in the snapshot")
	typ, _ = next(t, events)
	require.Equal(t, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT_END, typ)

	publish := func(kind worker.ChangeKind, key string, s *workerpb.WorkerState) {
		hub.Publish(worker.Change{Kind: kind, NamespaceID: env.ns.ID, WorkerInstanceKey: key, State: s})
	}
	publish(worker.ChangeHeartbeat, "w-2", watchedState(workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, "billing"))    // filtered out
	publish(worker.ChangeRegistered, "w-3", watchedState(workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, "orders"))    // shown
	publish(worker.ChangeInactive, "w-1", watchedState(workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, "orders"))    // leaves the view
	publish(worker.ChangeCleanedUp, "w-1", watchedState(workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, "orders")) // gone: not sent
	publish(worker.ChangeDrainRequested, "w-3", watchedState(workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, "orders"))

	publish(worker.ChangeInactive, "w-2", watchedState(workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, "billing"))
	publish(worker.ChangeInactive, "w-3", watchedState(workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, "orders"))

	var got, cursors []string
	for range 5 {
		ev := <-events
		got = append(got, ev.GetType().String()+" "+ev.GetWorker().GetWorkerInstanceKey()+ev.GetHostName())
		cursors = append(cursors, ev.GetCursor())
	}
	require.Equal(t, []string{
		"WORKER_EVENT_TYPE_REGISTERED w-3m1",
		"WORKER_EVENT_TYPE_INACTIVE w-1m1", // it no longer matches: one last event, then nothing
		"WORKER_EVENT_TYPE_DRAIN_REQUESTED w-3m1",
		"WORKER_EVENT_TYPE_INACTIVE w-3m1",
		"WORKER_EVENT_TYPE_HOST_OFFLINE m1", // host events are not filtered by the query
	}, got)
	for i := 1; i < len(cursors); i++ {
		a, err := parseCursor(cursors[i-1])
		require.NoError(t, err)
		b, err := parseCursor(cursors[i])
		require.NoError(t, err)
		require.Equal(t, a.epoch, b.epoch)
		require.Less(t, a.seq, b.seq)
	}
	require.Empty(t, events)
}

func TestWatchRefusesBadRequests(t *testing.T) {
	env := newTestEnv(t)
	env.deps.Watch = watch.NewHub(watch.Options{})
	h := NewLivenessHandler(env.deps)
	for name, req := range map[string]*livenesspb.WatchWorkersRequest{
		"query":           {Namespace: testNamespace, Query: "Nope = 1"},
		"cursor":          {Namespace: testNamespace, Cursor: "not a cursor"},
		"cursor epoch":    {Namespace: testNamespace, Cursor: "0-5"},
		"heartbeat_every": {Namespace: testNamespace, HeartbeatEvery: durationpb.New(-1)},
	} {
		err := h.Watch(context.Background(), req, func(*livenesspb.WorkerEvent) error { return nil })
		require.Equal(t, codes.InvalidArgument, statusCode(err), name)
	}
	err := NewLivenessHandler(Deps{History: env.history}).Watch(context.Background(),
		&livenesspb.WatchWorkersRequest{Namespace: "default"}, func(*livenesspb.WorkerEvent) error { return nil })
	require.Equal(t, codes.Unimplemented, statusCode(err))
}

func statusCode(err error) codes.Code { return serviceerror.ToStatus(err).Code() }

func TestWatchEndsOnStop(t *testing.T) {
	env := newTestEnv(t)
	env.deps.Watch = watch.NewHub(watch.Options{})
	h := NewLivenessHandler(env.deps)
	env.history.EXPECT().ListWorkers(gomock.Any(), gomock.Any()).Return(&workerpb.ListWorkersResponse{}, nil)
	events, done := watchEvents(t, h, &livenesspb.WatchWorkersRequest{Namespace: testNamespace})
	typ, _ := next(t, events)
	require.Equal(t, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT_END, typ)
	h.Stop()
	require.ErrorIs(t, <-done, context.Canceled)
}

func TestWatchSlowWatcherResyncs(t *testing.T) {
	env := newTestEnv(t)
	hub := watch.NewHub(watch.Options{BufferSize: 4})
	env.deps.Watch = hub
	h := NewLivenessHandler(env.deps)
	env.history.EXPECT().ListWorkers(gomock.Any(), gomock.Any()).Return(&workerpb.ListWorkersResponse{}, nil).Times(2)

	events, gate := make(chan *livenesspb.WorkerEvent), make(chan struct{})
	go func() {
		_ = h.Watch(t.Context(), &livenesspb.WatchWorkersRequest{Namespace: testNamespace}, func(ev *livenesspb.WorkerEvent) error {
			events <- ev
			if ev.GetWorker().GetWorkerInstanceKey() == "w-0" {
				<-gate // stuck sending w-0's event (decided by the event, not by a flag the test sets while this runs)
			}
			return nil
		})
	}()
	require.Equal(t, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT_END, (<-events).GetType())
	publish := func(key string) {
		hub.Publish(worker.Change{Kind: worker.ChangeDrainRequested, NamespaceID: env.ns.ID, WorkerInstanceKey: key,
			State: watchedState(workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, "orders")})
	}
	publish("w-0")
	require.Equal(t, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_DRAIN_REQUESTED, (<-events).GetType())
	// The watcher is stuck in send: more than its buffer arrives meanwhile.
	for i := range 10 {
		publish(fmt.Sprint("w-", i+1))
	}
	close(gate)
	resync := <-events
	require.Equal(t, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_RESYNC, resync.GetType())
	require.Equal(t, "the watcher fell behind", resync.GetReason())
	require.Equal(t, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT_END, (<-events).GetType())
	publish("w-99")
	ev := <-events
	require.Equal(t, "w-99", ev.GetWorker().GetWorkerInstanceKey(), "live again after the new snapshot")
}
