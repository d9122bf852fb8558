package frontend

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/admission"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// fakePressure is a history admission whose queue the test sets. Each write on its way adds
// perWrite to the wait behind it, past slots.
type fakePressure struct {
	wait     atomic.Int64
	perWrite atomic.Int64
	slots    int

	mu           sync.Mutex
	refusedEarly int
	lost         time.Duration
	retriedLeft  time.Duration
}

func (p *fakePressure) EstimatedWait() time.Duration { return time.Duration(p.wait.Load()) }

func (p *fakePressure) WaitBehind(n int) time.Duration {
	return time.Duration(int64(max(0, n-p.slots)) * p.perWrite.Load())
}

func (p *fakePressure) RefusedEarly(n int, lost time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusedEarly += n
	p.lost = lost
}

func (p *fakePressure) RetriedEarly(left time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retriedLeft = left
}

func (p *fakePressure) retried() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.retriedLeft
}

func (p *fakePressure) reported() (int, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusedEarly, p.lost
}

// newTestEarlyRefusal is an early refusal with the given target and no bound on the heartbeats
// outstanding, asking pressure, outside any server: the tests call its Tap themselves, and
// judge the wait alone.
func newTestEarlyRefusal(t *testing.T, pressure *fakePressure, target time.Duration) *EarlyRefusal {
	dc := dynamicconfig.NewMemoryClient()
	dc.OverrideValue(dynamicconfig.EarlyRefusalTargetWait.Key(), target)
	dc.OverrideValue(dynamicconfig.EarlyRefusalMaxOutstanding.Key(), 0)
	return NewEarlyRefusal(dynamicconfig.NewCollection(dc, log.NewTestLogger(t)), pressure, clock.NewRealTimeSource(), nil)
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

	// The Go SDK says who it is in its headers. It sends a refused heartbeat again, so at the
	// same wait its heartbeat is let through to wait for its turn in history, which its 9s
	// deadline allows.
	sdkCtx, cancelSDK := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "client-name", "temporal-go"), 9*time.Second)
	defer cancelSDK()
	require.NoError(t, beat(sdkCtx))
	require.Equal(t, int64(3), served.Load())
	// Refused once the wait runs past its deadline, the refusal reaches history as retried,
	// with the time the call had left, not as lost.
	pressure.wait.Store(int64(20 * time.Second))
	require.Equal(t, codes.ResourceExhausted, status.Code(beat(sdkCtx)))
	require.Eventually(t, func() bool { return pressure.retried() > 5*time.Second }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(3), served.Load())
	pressure.wait.Store(int64(3 * time.Second))

	// Everything else still reaches history: a shutdown is never refused for load.
	_, err := env.workflow.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
	require.NoError(t, err)

	// The refusals reach history, for the expiry brake, with the deadline they had left.
	require.Eventually(t, func() bool { n, _ := pressure.reported(); return n == 2 }, 10*time.Second, 10*time.Millisecond)
	_, lost := pressure.reported()
	require.Greater(t, lost, 5*time.Second)
	require.Eventually(t, func() bool {
		c := env.scope.Snapshot().Counters()["early_refusals+"]
		return c != nil && c.Value() == 3 // the SDK's retried one too
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

// Past the target a share of heartbeats is refused, growing with the excess wait, rather than
// all of them: refusing all or nothing made the load oscillate.
func TestEarlyRefusalRefusesAShareGrowingWithTheExcessWait(t *testing.T) {
	t.Parallel()
	pressure := &fakePressure{}
	e := newTestEarlyRefusal(t, pressure, 400*time.Millisecond)
	heartbeat := &tap.Info{FullMethodName: workflowservice.WorkflowService_RecordWorkerHeartbeat_FullMethodName}
	refusedOf := func(n int, info *tap.Info) int {
		refused := 0
		for range n {
			if _, err := e.Tap(context.Background(), info); err != nil {
				require.Equal(t, codes.ResourceExhausted, status.Code(err))
				refused++
			}
		}
		return refused
	}
	for _, c := range []struct {
		wait    time.Duration
		refused int // of 1,000 heartbeats
	}{
		{0, 0},
		{400 * time.Millisecond, 0}, // at the target: none
		{500 * time.Millisecond, 250},
		{600 * time.Millisecond, 500},
		{700 * time.Millisecond, 750},
		{800 * time.Millisecond, 1000}, // twice the target: all
		{time.Minute, 1000},
	} {
		pressure.wait.Store(int64(c.wait))
		require.InDelta(t, c.refused, refusedOf(1000, heartbeat), 1, "estimated wait %v", c.wait)
	}
	// Only heartbeats: a shutdown or a poll always passes.
	require.Zero(t, refusedOf(100, &tap.Info{FullMethodName: workflowservice.WorkflowService_ShutdownWorker_FullMethodName}))
	require.Zero(t, refusedOf(100, &tap.Info{FullMethodName: workflowservice.WorkflowService_PollActivityTaskQueue_FullMethodName}))
}

// A heartbeat that would wait past its own deadline is refused in the tap whatever the share,
// below the target too: let through, history's admission would refuse it after reading it.
// The SDK's retries of refused heartbeats arrive so, with less of their deadline left each time.
func TestEarlyRefusalRefusesWhatWouldWaitPastItsDeadline(t *testing.T) {
	t.Parallel()
	pressure := &fakePressure{}
	e := newTestEarlyRefusal(t, pressure, 400*time.Millisecond)
	heartbeat := &tap.Info{FullMethodName: workflowservice.WorkflowService_RecordWorkerHeartbeat_FullMethodName}
	refusedOf := func(n int, left time.Duration) int {
		refused := 0
		for range n {
			ctx, cancel := context.WithTimeout(context.Background(), left)
			if _, err := e.Tap(ctx, heartbeat); err != nil {
				require.Equal(t, codes.ResourceExhausted, status.Code(err))
				refused++
			}
			cancel()
		}
		return refused
	}

	// History keeps up: nothing is refused, however little of its deadline a call has left.
	require.Zero(t, refusedOf(100, 50*time.Millisecond))

	// Below the target (300ms of 400ms): a fresh call passes, a late retry that has less left
	// than the wait is refused.
	pressure.wait.Store(int64(300 * time.Millisecond))
	require.Zero(t, refusedOf(100, 10*time.Second))
	require.Equal(t, 100, refusedOf(100, 250*time.Millisecond))
	// They count for the expiry brake as lost for the wait that refused them, more than the
	// 250ms they had left.
	e.report()
	n, lost := pressure.reported()
	require.Equal(t, 100, n)
	require.GreaterOrEqual(t, lost, 300*time.Millisecond)

	// Past the target (500ms: a quarter refused by share), the calls with time enough keep
	// that share, the others are all refused.
	pressure.wait.Store(int64(500 * time.Millisecond))
	require.InDelta(t, 250, refusedOf(1000, 10*time.Second), 1)
	require.Equal(t, 100, refusedOf(100, 400*time.Millisecond))
}

// A heartbeat the Go SDK will send again (it retries a refusal while its 10 s deadline allows)
// is not lost when the tap refuses it: it is reported as retried, with the time it had left,
// and does not count for the expiry brake as a lost one. A refusal of any other caller, or one
// with too little left to be retried, is lost.
func TestEarlyRefusalTellsRetriedFromLost(t *testing.T) {
	t.Parallel()
	pressure := &fakePressure{}
	dc := dynamicconfig.NewMemoryClient()
	dc.OverrideValue(dynamicconfig.EarlyRefusalTargetWait.Key(), 400*time.Millisecond)
	scope := tally.NewTestScope("", nil)
	e := NewEarlyRefusal(dynamicconfig.NewCollection(dc, log.NewTestLogger(t)), pressure, clock.NewRealTimeSource(), scope)
	pressure.wait.Store(int64(time.Minute)) // everything is refused
	sdk := metadata.Pairs("client-name", "temporal-go", "client-version", "1.50.0")
	refuse := func(method string, header metadata.MD, left time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), left)
		defer cancel()
		_, err := e.Tap(ctx, &tap.Info{FullMethodName: method, Header: header})
		require.Equal(t, codes.ResourceExhausted, status.Code(err))
	}
	sdkBeat := workflowservice.WorkflowService_RecordWorkerHeartbeat_FullMethodName

	// The SDK's first attempt, and a retry with room for another: retried.
	refuse(sdkBeat, sdk, 9500*time.Millisecond)
	refuse(sdkBeat, sdk, 3*time.Second)
	e.report()
	n, _ := pressure.reported()
	require.Zero(t, n, "no heartbeat lost")
	require.InDelta(t, 9500*time.Millisecond, pressure.retried(), float64(100*time.Millisecond),
		"history learns how long they may still come")

	// Lost: the SDK's last attempt (too little left), a caller that does not say it is the SDK,
	// another client, a deadline longer than the SDK's, and vigil's own liveness API.
	refuse(sdkBeat, sdk, time.Second)
	refuse(sdkBeat, nil, 9*time.Second)
	refuse(sdkBeat, metadata.Pairs("client-name", "my-client"), 9*time.Second)
	refuse(sdkBeat, sdk, 30*time.Second)
	refuse(livenesspb.WorkerLivenessService_RecordHeartbeat_FullMethodName, sdk, 9*time.Second)
	e.report()
	n, _ = pressure.reported()
	require.Equal(t, 5, n)

	// Both count as early refusals; the retried ones also on their own.
	counters := scope.Snapshot().Counters()
	require.Equal(t, int64(7), counters["early_refusals+"].Value())
	require.Equal(t, int64(2), counters["early_refusals_retried+"].Value())
}

// A heartbeat whose caller retries refusals (the Go SDK's) waits for its turn rather than be
// refused at the first sign of a queue: it is judged against half of what is left of its
// deadline, and let through marked patient, so that history lets it wait too. A caller that
// gives up is refused at the target as before.
func TestEarlyRefusalLetsHeartbeatsThatWouldComeBackWait(t *testing.T) {
	t.Parallel()
	pressure := &fakePressure{}
	dc := dynamicconfig.NewMemoryClient()
	dc.OverrideValue(dynamicconfig.EarlyRefusalTargetWait.Key(), 500*time.Millisecond)
	e := NewEarlyRefusal(dynamicconfig.NewCollection(dc, log.NewTestLogger(t)), pressure, clock.NewRealTimeSource(), tally.NoopScope)
	sdk := metadata.Pairs("client-name", "temporal-go", "client-version", "1.50.0")
	sdkBeat := workflowservice.WorkflowService_RecordWorkerHeartbeat_FullMethodName
	// tapped sends n heartbeats with left of their deadline through the tap, and says how many
	// it refused and how many it let through marked patient.
	tapped := func(method string, header metadata.MD, left time.Duration, n int) (refused, patient int) {
		ctx, cancel := context.WithTimeout(context.Background(), left)
		defer cancel()
		for range n {
			passed, err := e.Tap(ctx, &tap.Info{FullMethodName: method, Header: header})
			if err != nil {
				require.Equal(t, codes.ResourceExhausted, status.Code(err))
				refused++
			} else if admission.Patient(passed) {
				patient++
			}
		}
		return refused, patient
	}

	// History's queue holds 3s of work, six times the target.
	pressure.wait.Store(int64(3 * time.Second))
	refused, patient := tapped(sdkBeat, sdk, 10*time.Second, 100)
	require.Zero(t, refused, "the SDK's heartbeat can wait 3s of its 10s")
	require.Equal(t, 100, patient, "and history is told it may")
	refused, patient = tapped(sdkBeat, nil, 10*time.Second, 100)
	require.Equal(t, 100, refused, "a caller that does not say it retries is refused at the target")
	require.Zero(t, patient)
	liveBeat := livenesspb.WorkerLivenessService_RecordHeartbeat_FullMethodName
	refused, _ = tapped(liveBeat, sdk, 10*time.Second, 100)
	require.Equal(t, 100, refused, "on the liveness API, the SDK's name promises nothing")
	refused, _ = tapped(liveBeat, nil, 10*time.Second, 100)
	require.Equal(t, 100, refused, "a liveness API caller that does not say it retries is refused at the target")
	retrying := metadata.Pairs(RetriesRefusalsHeader, "true")
	refused, patient = tapped(liveBeat, retrying, 10*time.Second, 100)
	require.Zero(t, refused, "one that says it retries can wait, as the SDK's heartbeat does")
	require.Equal(t, 100, patient)
	refused, _ = tapped(liveBeat, metadata.Pairs(RetriesRefusalsHeader, "false"), 10*time.Second, 100)
	require.Equal(t, 100, refused, "only \"true\" is a promise")
	refused, _ = tapped(sdkBeat, retrying, 10*time.Second, 100)
	require.Equal(t, 100, refused, "the header is the liveness API's; the SDK's call names its client")

	// Past half of its deadline, a share of patient heartbeats is refused, growing to all
	// of them at the deadline: 7.5s of the 10s is half-way.
	pressure.wait.Store(int64(7500 * time.Millisecond))
	refused, patient = tapped(sdkBeat, sdk, 10*time.Second, 100)
	require.InDelta(t, 50, refused, 2)
	require.Equal(t, 100-refused, patient)
	// A retry with 5s left meets the same queue past its deadline: refused.
	refused, _ = tapped(sdkBeat, sdk, 5*time.Second, 100)
	require.Equal(t, 100, refused)

	// Without a queue, every heartbeat passes; the SDK's are still marked patient, for a queue
	// that may form in history before they reach it.
	pressure.wait.Store(0)
	refused, patient = tapped(sdkBeat, sdk, 10*time.Second, 10)
	require.Zero(t, refused)
	require.Equal(t, 10, patient)
}

// Heartbeats let through but not yet in history's queue (being read, decoded, authorized)
// count in the wait a new one would meet: the queue alone cannot see a burst on its way.
func TestEarlyRefusalCountsHeartbeatsOnTheirWay(t *testing.T) {
	t.Parallel()
	pressure := &fakePressure{}
	// Each heartbeat ahead adds a second: one on its way is twice the target.
	pressure.perWrite.Store(int64(time.Second))
	env := startServer(t, func(env *testEnv) {
		env.deps.Pressure = pressure
		env.dc.OverrideValue(dynamicconfig.EarlyRefusalTargetWait.Key(), 500*time.Millisecond)
	})
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
	e := newTestEarlyRefusal(t, pressure, 500*time.Millisecond)
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

// With frontend.earlyRefusalMaxOutstanding set, a heartbeat arriving while that many are let
// through and unanswered is refused, however short history's queue; 0 bounds nothing.
func TestEarlyRefusalBoundsTheHeartbeatsOutstanding(t *testing.T) {
	t.Parallel()
	pressure := &fakePressure{} // history's queue empty: no wait at all
	dc := dynamicconfig.NewMemoryClient()
	dc.OverrideValue(dynamicconfig.EarlyRefusalMaxOutstanding.Key(), 2)
	e := NewEarlyRefusal(dynamicconfig.NewCollection(dc, log.NewTestLogger(t)), pressure, clock.NewRealTimeSource(), nil)
	heartbeat := &tap.Info{FullMethodName: livenesspb.WorkerLivenessService_RecordHeartbeat_FullMethodName}
	pass := func() context.Context {
		t.Helper()
		ctx, err := e.Tap(context.Background(), heartbeat)
		require.NoError(t, err)
		return ctx
	}

	first := pass()
	pass()
	_, err := e.Tap(context.Background(), heartbeat)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "a third while two are outstanding")
	_, err = e.Tap(context.Background(), &tap.Info{FullMethodName: workflowservice.WorkflowService_ShutdownWorker_FullMethodName})
	require.NoError(t, err, "only heartbeats are bounded")

	// The first is answered: one more passes, and the next is refused again.
	e.HandleRPC(first, &stats.Begin{})
	e.HandleRPC(first, &stats.End{})
	pass()
	_, err = e.Tap(context.Background(), heartbeat)
	require.Equal(t, codes.ResourceExhausted, status.Code(err))

	// Unbounded again once the setting is 0.
	dc.OverrideValue(dynamicconfig.EarlyRefusalMaxOutstanding.Key(), 0)
	e.readSettings()
	pass()
	require.Equal(t, 3, e.Outstanding())
}
