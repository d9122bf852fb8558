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

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// fakePressure is a history admission whose queue the test sets.
type fakePressure struct {
	wait atomic.Int64

	mu           sync.Mutex
	refusedEarly int
	lost         time.Duration
}

func (p *fakePressure) EstimatedWait() time.Duration { return time.Duration(p.wait.Load()) }

func (p *fakePressure) RefusedEarly(n int, lost time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusedEarly += n
	p.lost = lost
}

func (p *fakePressure) reported() (int, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusedEarly, p.lost
}

func TestEarlyRefusal(t *testing.T) {
	t.Parallel()
	pressure := &fakePressure{}
	env := startServer(t, func(env *testEnv) {
		env.deps.Pressure = pressure
		env.dc.OverrideValue(dynamicconfig.EarlyRefusalTargetWait.Key(), 500*time.Millisecond)
	})
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

	// History's queue would keep a heartbeat waiting longer than the target (500ms):
	// heartbeats are refused before they are read, and history never sees them.
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

	// Everything else still reaches history: a shutdown is never refused for load.
	_, err := env.workflow.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
	require.NoError(t, err)

	// The refusals reach history, for the expiry brake, with the deadline they had left.
	require.Eventually(t, func() bool { n, _ := pressure.reported(); return n == 2 }, 10*time.Second, 10*time.Millisecond)
	_, lost := pressure.reported()
	require.Greater(t, lost, 5*time.Second)
	require.Eventually(t, func() bool {
		c := env.scope.Snapshot().Counters()["early_refusals+"]
		return c != nil && c.Value() == 2
	}, 10*time.Second, 10*time.Millisecond)

	// A raised target applies without a restart...
	env.dc.OverrideValue(dynamicconfig.EarlyRefusalTargetWait.Key(), 5*time.Second)
	require.Eventually(t, func() bool { return beat(ctx) == nil }, 10*time.Second, 10*time.Millisecond)
	// ...and 0 turns early refusal off: history's own admission decides.
	env.dc.OverrideValue(dynamicconfig.EarlyRefusalTargetWait.Key(), time.Duration(0))
	pressure.wait.Store(int64(time.Hour))
	require.Eventually(t, func() bool { return livenessBeat(ctx) == nil }, 10*time.Second, 10*time.Millisecond)

	// Caught up: served again at once.
	env.dc.OverrideValue(dynamicconfig.EarlyRefusalTargetWait.Key(), 500*time.Millisecond)
	pressure.wait.Store(0)
	require.NoError(t, beat(ctx))
}
