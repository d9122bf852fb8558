package activity_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/chasm/chasmtest"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/dynamicconfig"
)

const (
	testNamespaceID  = "ns-id-1"
	testNamespace    = "ns-one"
	testTaskQueue    = "orders"
	testNumShards    = 8
	testWorkerKey    = "worker-a"
	testControlQueue = "temporal-sys/worker-commands/ns-one/group-a"
)

// recordingDispatcher records what is queued in matching.
type recordingDispatcher struct {
	mu       sync.Mutex
	refs     []activity.ActivityTaskRef
	failWith error
	// forgetting accepts tasks without recording them: matching that dies with its process.
	forgetting bool
}

func (d *recordingDispatcher) AddActivityTask(_ context.Context, ref activity.ActivityTaskRef) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failWith != nil {
		return d.failWith
	}
	if !d.forgetting {
		d.refs = append(d.refs, ref)
	}
	return nil
}

func (d *recordingDispatcher) forget(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.forgetting = on
}

func (d *recordingDispatcher) dispatched() []activity.ActivityTaskRef {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]activity.ActivityTaskRef(nil), d.refs...)
}

func (d *recordingDispatcher) last(t *testing.T) activity.ActivityTaskRef {
	t.Helper()
	refs := d.dispatched()
	require.NotEmpty(t, refs, "nothing was dispatched")
	return refs[len(refs)-1]
}

type bindCall struct {
	NamespaceID, WorkerInstanceKey string
	Binding                        activity.Binding
}

// recordingBinder records binds and unbinds and answers binds with a chosen outcome.
type recordingBinder struct {
	mu       sync.Mutex
	outcome  activity.BindOutcome
	binds    []bindCall
	unbinds  []bindCall
	failWith error
}

func (b *recordingBinder) BindActivity(_ context.Context, namespaceID, key string, binding activity.Binding) (activity.BindOutcome, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failWith != nil {
		return 0, b.failWith
	}
	b.binds = append(b.binds, bindCall{namespaceID, key, binding})
	if b.outcome == 0 {
		return activity.BindOutcomeBound, nil
	}
	return b.outcome, nil
}

func (b *recordingBinder) UnbindActivity(_ context.Context, namespaceID, key string, binding activity.Binding) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failWith != nil {
		return b.failWith
	}
	b.unbinds = append(b.unbinds, bindCall{namespaceID, key, binding})
	return nil
}

func (b *recordingBinder) answer(o activity.BindOutcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.outcome = o
}

func (b *recordingBinder) calls() (binds, unbinds []bindCall) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]bindCall(nil), b.binds...), append([]bindCall(nil), b.unbinds...)
}

type cancelCommand struct {
	NamespaceID, ControlQueue string
	TaskToken                 []byte
}

// recordingSender records CancelActivity commands.
type recordingSender struct {
	mu       sync.Mutex
	commands []cancelCommand
	failWith error
	attempts int
}

func (s *recordingSender) SendCancelActivity(_ context.Context, namespaceID, controlQueue string, token []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.failWith != nil {
		return s.failWith
	}
	s.commands = append(s.commands, cancelCommand{namespaceID, controlQueue, token})
	return nil
}

func (s *recordingSender) sent() []cancelCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cancelCommand(nil), s.commands...)
}

func (s *recordingSender) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = err
}

type bundle struct {
	t          *testing.T
	engine     *chasmtest.Engine
	handler    *activity.Handler
	config     *activity.Config
	dc         *dynamicconfig.MemoryClient
	dispatcher *recordingDispatcher
	binder     *recordingBinder
	sender     *recordingSender
	ctx        context.Context
}

func setup(t *testing.T) *bundle {
	t.Helper()
	logger := zaptest.NewLogger(t)
	dcClient := dynamicconfig.NewMemoryClient()
	config := activity.NewConfig(dynamicconfig.NewCollection(dcClient, logger), testNumShards)
	b := &bundle{
		t: t, config: config, dc: dcClient, ctx: context.Background(),
		dispatcher: &recordingDispatcher{}, binder: &recordingBinder{}, sender: &recordingSender{},
	}
	lib := activity.NewLibrary(config, b.dispatcher, b.binder, b.sender, tally.NoopScope, logger)
	b.engine = chasmtest.NewEngine(t, chasmtest.NewRegistry(t, lib))
	b.handler = activity.NewHandler(b.engine, config, tally.NoopScope, logger,
		activity.WithDispatcher(b.dispatcher), activity.WithTimeSource(b.engine.Clock()))
	return b
}

type startOption func(*activitypb.StartActivityRequest)

func withTimeouts(s2c, s2s, st2c, hb time.Duration) startOption {
	return func(r *activitypb.StartActivityRequest) {
		r.ScheduleToCloseTimeout = durationpb.New(s2c)
		r.ScheduleToStartTimeout = durationpb.New(s2s)
		r.StartToCloseTimeout = durationpb.New(st2c)
		r.HeartbeatTimeout = durationpb.New(hb)
	}
}

func withRetry(initial time.Duration, coefficient float64, maxAttempts int32, nonRetryable ...string) startOption {
	return func(r *activitypb.StartActivityRequest) {
		r.RetryPolicy = &commonpb.RetryPolicy{
			InitialInterval: durationpb.New(initial), BackoffCoefficient: coefficient,
			MaximumAttempts: maxAttempts, NonRetryableErrorTypes: nonRetryable,
		}
	}
}

func withRequestID(id string) startOption {
	return func(r *activitypb.StartActivityRequest) { r.RequestId = id }
}

func startRequest(activityID string, opts ...startOption) *activitypb.StartActivityRequest {
	req := &activitypb.StartActivityRequest{
		NamespaceId: testNamespaceID, Namespace: testNamespace, ActivityId: activityID,
		ActivityType: &commonpb.ActivityType{Name: "Charge"}, TaskQueue: testTaskQueue,
		StartToCloseTimeout: durationpb.New(time.Minute), RequestId: "req-" + activityID,
		Input: payloads("input"),
	}
	for _, opt := range opts {
		opt(req)
	}
	return req
}

// start starts an activity and runs its first dispatch.
func (b *bundle) start(activityID string, opts ...startOption) string {
	b.t.Helper()
	resp, err := b.handler.StartActivity(b.ctx, startRequest(activityID, opts...))
	require.NoError(b.t, err)
	require.True(b.t, resp.Started)
	b.runSideEffects()
	return resp.RunId
}

// runSideEffects runs every ready side-effect task; none may fail.
func (b *bundle) runSideEffects() {
	b.t.Helper()
	require.NoError(b.t, b.engine.RunSideEffectTasks(b.ctx))
}

// poll starts the attempt matching last queued, as a worker's poll would, and runs the bind.
func (b *bundle) poll(ref activity.ActivityTaskRef) *activitypb.RecordActivityTaskStartedResponse {
	b.t.Helper()
	resp, err := b.recordStarted(ref, testWorkerKey, "poll-"+ref.ActivityID)
	require.NoError(b.t, err)
	b.runSideEffects()
	return resp
}

func (b *bundle) recordStarted(ref activity.ActivityTaskRef, workerKey, pollRequestID string) (*activitypb.RecordActivityTaskStartedResponse, error) {
	return b.handler.RecordActivityTaskStarted(b.ctx, &activitypb.RecordActivityTaskStartedRequest{
		NamespaceId: ref.NamespaceID, ActivityId: ref.ActivityID, RunId: ref.RunID, Stamp: ref.Stamp,
		Identity: "123@host-a", WorkerInstanceKey: workerKey, WorkerControlTaskQueue: testControlQueue,
		PollRequestId: pollRequestID,
	})
}

// startAndPoll starts an activity and gives its first attempt to the test worker.
func (b *bundle) startAndPoll(activityID string, opts ...startOption) *activitypb.RecordActivityTaskStartedResponse {
	b.t.Helper()
	b.start(activityID, opts...)
	return b.poll(b.dispatcher.last(b.t))
}

func (b *bundle) complete(token []byte, result string) error {
	_, err := b.handler.RespondActivityTaskCompleted(b.ctx, &activitypb.RespondActivityTaskCompletedRequest{
		NamespaceId: testNamespaceID, TaskToken: token, Result: payloads(result),
	})
	return err
}

func (b *bundle) fail(token []byte, failure *failurepb.Failure) error {
	_, err := b.handler.RespondActivityTaskFailed(b.ctx, &activitypb.RespondActivityTaskFailedRequest{
		NamespaceId: testNamespaceID, TaskToken: token, Failure: failure,
	})
	return err
}

func (b *bundle) heartbeat(token []byte, details string) (*activitypb.RecordActivityTaskHeartbeatResponse, error) {
	return b.handler.RecordActivityTaskHeartbeat(b.ctx, &activitypb.RecordActivityTaskHeartbeatRequest{
		NamespaceId: testNamespaceID, TaskToken: token, Details: payloads(details),
	})
}

func (b *bundle) describe(activityID string) *activitypb.ActivityState {
	b.t.Helper()
	resp, err := b.handler.DescribeActivity(b.ctx, &activitypb.DescribeActivityRequest{NamespaceId: testNamespaceID, ActivityId: activityID})
	require.NoError(b.t, err)
	return resp.State
}

func (b *bundle) reschedule(workerKey string, entries ...*workerpb.BoundActivity) []workerpb.RescheduleOutcome {
	b.t.Helper()
	resp, err := b.handler.RescheduleActivities(b.ctx, &workerpb.RescheduleActivitiesRequest{
		NamespaceId: testNamespaceID, ShardId: 1, WorkerInstanceKey: workerKey, Activities: entries,
	})
	require.NoError(b.t, err)
	require.Len(b.t, resp.Outcomes, len(entries))
	return resp.Outcomes
}

func (b *bundle) pendingOfType(name string) int {
	return len(b.engine.PendingTasksOfType(activity.LibraryName + "." + name))
}

func entry(activityID, runID string, stamp int64) *workerpb.BoundActivity {
	return &workerpb.BoundActivity{NamespaceId: testNamespaceID, ActivityId: activityID, RunId: runID, Stamp: stamp}
}

func payloads(s string) *commonpb.Payloads {
	return &commonpb.Payloads{Payloads: []*commonpb.Payload{{
		Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"` + s + `"`),
	}}}
}

func appFailure(errType string, nonRetryable bool) *failurepb.Failure {
	return &failurepb.Failure{
		Message: "boom",
		FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{
			Type: errType, NonRetryable: nonRetryable,
		}},
	}
}

func requireNotFound(t *testing.T, err error) {
	t.Helper()
	var notFound *serviceerror.NotFound
	require.True(t, errors.As(err, &notFound), "want NotFound, got %v", err)
}

func requireFailedPrecondition(t *testing.T, err error) {
	t.Helper()
	var fp *serviceerror.FailedPrecondition
	require.True(t, errors.As(err, &fp), "want FailedPrecondition, got %v", err)
}

func chasmEngineContext(b *bundle) context.Context {
	return chasm.NewEngineContext(b.ctx, b.engine)
}

var errDown = errors.New("matching unreachable")
