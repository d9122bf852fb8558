package frontend

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
)

// fakePressure is an overload controller with a simple rule: a heartbeat is refused when the
// wait the test sets, plus perWrite for each heartbeat outstanding past slots, exceeds 500ms
// or what is left of its deadline.
type fakePressure struct {
	wait     atomic.Int64
	perWrite atomic.Int64
	slots    int

	mu           sync.Mutex
	refusedEarly int
	lastLeft     time.Duration
}

func (p *fakePressure) RefuseEarly(outstanding int, left time.Duration) bool {
	p.mu.Lock()
	p.lastLeft = left
	p.mu.Unlock()
	wait := time.Duration(p.wait.Load()) + time.Duration(int64(max(0, outstanding-p.slots))*p.perWrite.Load())
	return wait > 500*time.Millisecond || (left > 0 && wait >= left)
}

func (p *fakePressure) RefusedEarly(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusedEarly += n
}

func (p *fakePressure) reported() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusedEarly
}

func (p *fakePressure) left() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastLeft
}

func TestEarlyRefusal(t *testing.T) {
	t.Parallel()
	pressure := &fakePressure{}
	env := startServer(t, func(env *testEnv) { env.deps.Pressure = pressure })
	var served atomic.Int64
	env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).AnyTimes().DoAndReturn(
		func(_ context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
			served.Add(1)
			return okResults(req), nil
		})
	env.history.EXPECT().ShutdownWorker(gomock.Any(), gomock.Any()).AnyTimes().Return(&workerpb.ShutdownWorkerResponse{}, nil)
	beat := func(ctx context.Context) error {
		_, err := env.workflow.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{
			Namespace: testNamespace, WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{heartbeatOf("w-1")},
		})
		return err
	}
	livenessBeat := func(ctx context.Context) error {
		_, err := env.liveness.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-2")})
		return err
	}
	ctx := context.Background()

	// History keeps up: every heartbeat is served.
	require.NoError(t, beat(ctx))
	require.NoError(t, livenessBeat(ctx))
	require.Equal(t, int64(2), served.Load())

	// The controller says history is behind: heartbeats are refused before they are read,
	// and history never sees them.
	pressure.wait.Store(int64(3 * time.Second))
	deadlineCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, send := range []func(context.Context) error{beat, livenessBeat} {
		err := send(deadlineCtx)
		require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
		var exhausted *serviceerror.ResourceExhausted
		require.ErrorAs(t, serviceerror.FromStatus(status.Convert(err)), &exhausted, "a Temporal ResourceExhausted, which the SDK retries with backoff")
		require.Equal(t, enumspb.RESOURCE_EXHAUSTED_CAUSE_SYSTEM_OVERLOADED, exhausted.Cause)
	}
	require.Equal(t, int64(2), served.Load())
	// The controller judged each by what was left of its deadline.
	require.InDelta(t, 10*time.Second, pressure.left(), float64(5*time.Second))

	// Everything else still reaches history: a shutdown is never refused for load.
	_, err := env.workflow.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
	require.NoError(t, err)

	// The refusals reach the controller, for the expiry brake.
	require.Eventually(t, func() bool { return pressure.reported() == 2 }, 10*time.Second, 10*time.Millisecond)

	// Caught up: served again at once.
	pressure.wait.Store(0)
	require.NoError(t, beat(ctx))
	require.Equal(t, int64(3), served.Load())
}

// Only heartbeats are judged: a shutdown or a poll always passes the tap.
func TestEarlyRefusalJudgesOnlyHeartbeats(t *testing.T) {
	t.Parallel()
	pressure := &fakePressure{}
	pressure.wait.Store(int64(time.Hour))
	e := NewEarlyRefusal(pressure, clock.NewRealTimeSource(), nil)
	for _, method := range []string{
		workflowservice.WorkflowService_ShutdownWorker_FullMethodName,
		workflowservice.WorkflowService_PollActivityTaskQueue_FullMethodName,
	} {
		_, err := e.Tap(context.Background(), &tap.Info{FullMethodName: method})
		require.NoError(t, err, method)
	}
	for _, method := range []string{
		workflowservice.WorkflowService_RecordWorkerHeartbeat_FullMethodName,
		livenesspb.WorkerLivenessService_RecordHeartbeat_FullMethodName,
	} {
		_, err := e.Tap(context.Background(), &tap.Info{FullMethodName: method})
		require.Equal(t, codes.ResourceExhausted, status.Code(err), method)
	}
	e.report()
	require.Equal(t, 2, pressure.reported())
}

// Heartbeats let through but not yet in history's queue (being read, decoded, authorized)
// count in the wait a new one would meet: the queue alone cannot see a burst on its way.
func TestEarlyRefusalCountsHeartbeatsOnTheirWay(t *testing.T) {
	t.Parallel()
	pressure := &fakePressure{}
	// Each heartbeat ahead adds a second: one on its way is over the fake's 500ms.
	pressure.perWrite.Store(int64(time.Second))
	env := startServer(t, func(env *testEnv) { env.deps.Pressure = pressure })
	arrived, release := make(chan struct{}), make(chan struct{})
	env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).AnyTimes().DoAndReturn(
		func(_ context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
			arrived <- struct{}{}
			<-release
			return okResults(req), nil
		})
	beat := func() error {
		_, err := env.liveness.RecordHeartbeat(context.Background(), &livenesspb.RecordHeartbeatRequest{Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-1")})
		return err
	}

	// The first passes, and is held on its way: history's queue (pressure.wait) stays empty.
	first := make(chan error, 1)
	go func() { first <- beat() }()
	<-arrived
	require.Equal(t, 1, env.server.early.Outstanding())

	// The next would wait behind it: refused before it is read.
	require.Equal(t, codes.ResourceExhausted, status.Code(beat()))

	// Answered, the first no longer counts, and heartbeats pass again.
	close(release)
	require.NoError(t, <-first)
	require.Eventually(t, func() bool { return env.server.early.Outstanding() == 0 }, 10*time.Second, 10*time.Millisecond)
	second := make(chan error, 1)
	go func() { second <- beat() }()
	<-arrived
	require.NoError(t, <-second)
	require.Zero(t, pressure.wait.Load(), "history's own queue never grew")
}

// A heartbeat let through counts from the tap on, before its RPC begins; one whose RPC never
// begins (grpc aborted it in between) is forgotten within two windows instead of inflating the
// estimate for ever.
func TestEarlyRefusalCountsFromTheTapAndForgetsStreamsThatNeverBegin(t *testing.T) {
	t.Parallel()
	pressure := &fakePressure{}
	pressure.perWrite.Store(int64(time.Second)) // one heartbeat on its way: twice the target
	e := NewEarlyRefusal(pressure, clock.NewRealTimeSource(), nil)
	heartbeat := &tap.Info{FullMethodName: livenesspb.WorkerLivenessService_RecordHeartbeat_FullMethodName}

	_, err := e.Tap(context.Background(), heartbeat)
	require.NoError(t, err)
	require.Equal(t, 1, e.Outstanding(), "counted before its RPC begins")
	_, err = e.Tap(context.Background(), heartbeat)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "the next waits behind it")

	// Its RPC never begins: two windows later it no longer counts.
	e.transit.rotate()
	require.Equal(t, 1, e.Outstanding())
	e.transit.rotate()
	require.Zero(t, e.Outstanding())
	_, err = e.Tap(context.Background(), heartbeat)
	require.NoError(t, err)
}
