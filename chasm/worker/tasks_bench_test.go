package worker_test

import (
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// BenchmarkLeaseTimerWaitsInMemory: a live worker's expiry timer fires after heartbeats
// answered from memory moved its deadline, and waits for the new deadline (chasm.DeferTask).
// A worker beating every second with the usual 3 s lease, written once in ten beats, costs
// one such firing about every two heartbeats.
//
//	go test -run '^$' -bench BenchmarkLeaseTimerWaitsInMemory -count 10 ./chasm/worker/
func BenchmarkLeaseTimerWaitsInMemory(b *testing.B) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	state := liveWorkerState(now)
	registry, exec := loadBenchWorker(b, state)
	timerType, ok := registry.TaskForPayload(&workerpb.LeaseExpiryTask{})
	if !ok {
		b.Fatal("no lease expiry task type")
	}
	task := &chasm.Task{Type: timerType, Attributes: chasm.TaskAttributes{ScheduledTime: state.LeaseTimerTime.AsTime()}, Payload: &workerpb.LeaseExpiryTask{}}

	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := exec.ExecutePureTask(now, task); err == nil {
			b.Fatal("the timer ran instead of waiting")
		} else if until, deferred := chasm.AsDeferred(err); !deferred || !until.Equal(state.LeaseDeadline.AsTime()) {
			b.Fatalf("want a wait for the deadline, got %v", err)
		}
	}
}

// BenchmarkHeartbeatInMemory is the transaction of a heartbeat answered from memory, on the
// state of the worker in BenchmarkLeaseTimerWaitsInMemory: it renews the lease and keeps the
// snapshot the SDK sent, and is applied without a write (chasm.Mutation.Deferred). Nine in
// ten heartbeats of a worker beating every second are this.
//
//	go test -run '^$' -bench BenchmarkHeartbeatInMemory -count 10 ./chasm/worker/
func BenchmarkHeartbeatInMemory(b *testing.B) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, exec := loadBenchWorker(b, liveWorkerState(now))
	ev := worker.EventHeartbeat{
		Heartbeat: sdkHeartbeat(now), Lease: 3 * time.Second,
		WriteInterval: worker.HeartbeatWriteIntervalDefault, MayDefer: true,
	}

	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		m, err := exec.Update(now, func(ctx chasm.MutableContext, c chasm.Component) error {
			return worker.TransitionHeartbeatReceived.Apply(c.(*worker.Worker), ctx, ev)
		})
		if err != nil {
			b.Fatal(err)
		}
		if !m.Deferred {
			b.Fatal("the heartbeat was to be answered from memory")
		}
		exec.Apply(m)
	}
}

// liveWorkerState is a live worker beating every second with a 3 s lease, whose last written
// heartbeat was 4 s before now (its timer at +3 s) and whose latest was a second ago.
func liveWorkerState(now time.Time) *workerpb.WorkerState {
	written := now.Add(-4 * time.Second)
	ts := timestamppb.New
	return &workerpb.WorkerState{
		Namespace:            benchNamespace,
		Status:               workerpb.WorkerStatus_WORKER_STATUS_ACTIVE,
		LastHeartbeat:        sdkHeartbeat(now.Add(-time.Second)),
		LastHeartbeatTime:    ts(now.Add(-time.Second)),
		WrittenHeartbeatTime: ts(written),
		LeaseDuration:        durationpb.New(3 * time.Second),
		LeaseDeadline:        ts(now.Add(2 * time.Second)),
		LeaseTimerTime:       ts(written.Add(3 * time.Second)),
		LeaseBound:           ts(written.Add(13 * time.Second)),
	}
}

// loadBenchWorker loads state as the worker component's execution, as an engine does.
func loadBenchWorker(b *testing.B, state *workerpb.WorkerState) (*chasm.Registry, *chasm.Execution) {
	b.Helper()
	logger := zap.NewNop()
	config := worker.NewConfig(dynamicconfig.NewCollection(dynamicconfig.NewMemoryClient(), logger), benchNumShards)
	registry := chasm.NewRegistry()
	if err := registry.Register(worker.NewLibrary(config, worker.NotFoundRescheduler{}, tally.NoopScope, logger)); err != nil {
		b.Fatal(err)
	}
	rc, _ := registry.Component(worker.Archetype)
	encoded, err := proto.Marshal(state)
	if err != nil {
		b.Fatal(err)
	}
	exec, err := chasm.LoadExecution(registry, rc, chasm.ExecutionKey{NamespaceID: benchNamespaceID, BusinessID: "w", RunID: "r"}, encoded, nil)
	if err != nil {
		b.Fatal(err)
	}
	return registry, exec
}

// sdkHeartbeat is a heartbeat as the Go SDK fills it.
func sdkHeartbeat(at time.Time) *workerv1.WorkerHeartbeat {
	return &workerv1.WorkerHeartbeat{
		WorkerInstanceKey: "6a0f3c1e-2d4b-4c8e-9f1a-7b5d3e2c1a09",
		WorkerIdentity:    "4242@bench-host",
		HostInfo:          &workerv1.WorkerHostInfo{HostName: "bench-host", WorkerGroupingKey: "group", ProcessId: "4242"},
		TaskQueue:         "orders",
		SdkName:           "temporal-go",
		SdkVersion:        "1.51.0",
		Status:            enumspb.WORKER_STATUS_RUNNING,
		StartTime:         timestamppb.New(at.Add(-time.Hour)),
		HeartbeatTime:     timestamppb.New(at),
		ActivityTaskSlotsInfo: &workerv1.WorkerSlotsInfo{
			CurrentAvailableSlots: 990, CurrentUsedSlots: 10, SlotSupplierKind: "Fixed"},
		WorkflowTaskSlotsInfo:     &workerv1.WorkerSlotsInfo{CurrentAvailableSlots: 1000, SlotSupplierKind: "Fixed"},
		ActivityPollerInfo:        &workerv1.WorkerPollerInfo{CurrentPollers: 2},
		WorkflowPollerInfo:        &workerv1.WorkerPollerInfo{CurrentPollers: 2},
		ElapsedSinceLastHeartbeat: durationpb.New(time.Second),
	}
}
