package frontend

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	activityv1 "go.temporal.io/api/activity/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/errordetails/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/matching"
)

const (
	testTaskQueue    = "orders-tq"
	testControlQueue = "temporal-sys/worker-commands/orders/group-1"
)

// newActivityTestEnv is a testEnv whose handler also has a mocked matching.
func newActivityTestEnv(t *testing.T, opts ...WorkflowHandlerOption) (*testEnv, *MockMatching) {
	t.Helper()
	env := newTestEnv(t)
	m := NewMockMatching(gomock.NewController(t))
	env.deps.Matching = m
	env.workflow = NewWorkflowHandler(env.deps, opts...)
	return env, m
}

func taskToken(t *testing.T, namespaceID, activityID string, stamp int64) []byte {
	t.Helper()
	b, err := activity.EncodeTaskToken(&activitypb.TaskToken{
		NamespaceId: namespaceID, ActivityId: activityID, RunId: "run-1", Stamp: stamp, Attempt: int32(stamp),
	})
	require.NoError(t, err)
	return b
}

func requireProtoEqual(t *testing.T, want, got proto.Message) {
	t.Helper()
	require.True(t, proto.Equal(want, got), "want %s\n got %s", protoText(want), protoText(got))
}

func protoText(m proto.Message) string { return prototext.Format(m) }

func TestStartActivityExecution(t *testing.T) {
	t.Parallel()

	t.Run("PassesTheRequestToHistory", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		req := &workflowservice.StartActivityExecutionRequest{
			Namespace:              testNamespace,
			Identity:               "client-1",
			RequestId:              "req-1",
			ActivityId:             "a-1",
			ActivityType:           &commonpb.ActivityType{Name: "charge"},
			TaskQueue:              &taskqueuepb.TaskQueue{Name: testTaskQueue},
			ScheduleToCloseTimeout: durationpb.New(time.Minute),
			ScheduleToStartTimeout: durationpb.New(0),
			StartToCloseTimeout:    durationpb.New(10 * time.Second),
			HeartbeatTimeout:       durationpb.New(2 * time.Second),
			StartDelay:             durationpb.New(0),
			RetryPolicy:            &commonpb.RetryPolicy{MaximumAttempts: 3},
			Input:                  &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("in")}}},
			Header:                 &commonpb.Header{},
			IdReusePolicy:          enumspb.ACTIVITY_ID_REUSE_POLICY_REJECT_DUPLICATE,
			IdConflictPolicy:       enumspb.ACTIVITY_ID_CONFLICT_POLICY_USE_EXISTING,
			Priority:               &commonpb.Priority{PriorityKey: 2},
		}
		env.history.EXPECT().StartActivity(gomock.Any(), gomock.Any()).DoAndReturn(
			func(_ context.Context, got *activitypb.StartActivityRequest) (*activitypb.StartActivityResponse, error) {
				requireProtoEqual(t, &activitypb.StartActivityRequest{
					NamespaceId:            env.ns.ID,
					Namespace:              testNamespace,
					ActivityId:             "a-1",
					ActivityType:           req.ActivityType,
					TaskQueue:              testTaskQueue,
					ScheduleToCloseTimeout: req.ScheduleToCloseTimeout,
					ScheduleToStartTimeout: req.ScheduleToStartTimeout,
					StartToCloseTimeout:    req.StartToCloseTimeout,
					HeartbeatTimeout:       req.HeartbeatTimeout,
					StartDelay:             req.StartDelay,
					RetryPolicy:            req.RetryPolicy,
					Input:                  req.Input,
					Header:                 req.Header,
					RequestId:              "req-1",
					Identity:               "client-1",
					IdReusePolicy:          req.IdReusePolicy,
					IdConflictPolicy:       req.IdConflictPolicy,
					Priority:               req.Priority,
				}, got)
				return &activitypb.StartActivityResponse{RunId: "run-1", Started: true}, nil
			})
		resp, err := env.workflow.StartActivityExecution(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, "run-1", resp.GetRunId())
		require.True(t, resp.GetStarted())
	})

	t.Run("DuplicateIsAlreadyStartedWithDetails", func(t *testing.T) {
		t.Parallel()
		env := startServer(t, nil)
		env.history.EXPECT().StartActivity(gomock.Any(), gomock.Any()).Return(nil,
			serviceerror.NewActivityExecutionAlreadyStarted("activity a-1 is running", "req-0", "run-0"))
		_, err := env.workflow.StartActivityExecution(context.Background(), &workflowservice.StartActivityExecutionRequest{
			Namespace: testNamespace, ActivityId: "a-1", ActivityType: &commonpb.ActivityType{Name: "charge"},
			TaskQueue: &taskqueuepb.TaskQueue{Name: testTaskQueue}, StartToCloseTimeout: durationpb.New(time.Second),
		})
		require.Equal(t, codes.AlreadyExists, status.Code(err), "%v", err)
		details := status.Convert(err).Details()
		require.Len(t, details, 1)
		failure, ok := details[0].(*errordetails.ActivityExecutionAlreadyStartedFailure)
		require.True(t, ok, "%T", details[0])
		require.Equal(t, "run-0", failure.GetRunId())
		require.Equal(t, "req-0", failure.GetStartRequestId())
	})

	t.Run("UnknownNamespace", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		_, err := env.workflow.StartActivityExecution(context.Background(), &workflowservice.StartActivityExecutionRequest{Namespace: "nope"})
		var nf *serviceerror.NamespaceNotFound
		require.ErrorAs(t, err, &nf)
	})
}

func TestActivityValidation(t *testing.T) {
	t.Parallel()
	env := startServer(t, nil)
	ctx := context.Background()
	valid := func() *workflowservice.StartActivityExecutionRequest {
		return &workflowservice.StartActivityExecutionRequest{
			Namespace: testNamespace, ActivityId: "a-1", ActivityType: &commonpb.ActivityType{Name: "charge"},
			TaskQueue: &taskqueuepb.TaskQueue{Name: testTaskQueue}, ScheduleToCloseTimeout: durationpb.New(time.Minute),
		}
	}
	start := func(mutate func(*workflowservice.StartActivityExecutionRequest)) func() error {
		return func() error {
			req := valid()
			mutate(req)
			_, err := env.workflow.StartActivityExecution(ctx, req)
			return err
		}
	}
	// No history call is expected: gomock fails the test on any.
	for _, tc := range []struct {
		name    string
		call    func() error
		message string
	}{
		{"StartWithoutActivityID", start(func(r *workflowservice.StartActivityExecutionRequest) { r.ActivityId = "" }), "activity_id is required"},
		{"StartWithoutType", start(func(r *workflowservice.StartActivityExecutionRequest) { r.ActivityType = nil }), "activity_type.name is required"},
		{"StartWithoutTaskQueue", start(func(r *workflowservice.StartActivityExecutionRequest) { r.TaskQueue = nil }), "task_queue.name is required"},
		{"StartWithoutTimeouts", start(func(r *workflowservice.StartActivityExecutionRequest) {
			r.ScheduleToCloseTimeout, r.StartToCloseTimeout = durationpb.New(0), durationpb.New(0)
		}), "schedule_to_close_timeout or start_to_close_timeout is required"},
		{"StartWithNegativeHeartbeatTimeout", start(func(r *workflowservice.StartActivityExecutionRequest) {
			r.HeartbeatTimeout = durationpb.New(-time.Second)
		}), "heartbeat_timeout -1s is negative"},
		{"StartWithCompletionCallbacks", start(func(r *workflowservice.StartActivityExecutionRequest) {
			r.CompletionCallbacks = []*commonpb.Callback{{}}
		}), "completion_callbacks are not supported"},
		{"CompletedWithoutToken", func() error {
			_, err := env.workflow.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{Namespace: testNamespace})
			return err
		}, "task_token is required"},
		{"HeartbeatWithoutNamespace", func() error {
			_, err := env.workflow.RecordActivityTaskHeartbeat(ctx, &workflowservice.RecordActivityTaskHeartbeatRequest{TaskToken: []byte("x")})
			return err
		}, "namespace is required"},
		{"MalformedToken", func() error {
			_, err := env.workflow.RespondActivityTaskFailed(ctx, &workflowservice.RespondActivityTaskFailedRequest{
				Namespace: testNamespace, TaskToken: []byte("not a token"),
			})
			return err
		}, "task_token: "},
		{"TokenOfAnotherNamespace", func() error {
			_, err := env.workflow.RespondActivityTaskCanceled(ctx, &workflowservice.RespondActivityTaskCanceledRequest{
				Namespace: testNamespace, TaskToken: taskToken(t, "other-namespace-id", "a-1", 1),
			})
			return err
		}, "task_token belongs to another namespace"},
		{"ByIdWithoutActivityID", func() error {
			_, err := env.workflow.RespondActivityTaskCompletedById(ctx, &workflowservice.RespondActivityTaskCompletedByIdRequest{Namespace: testNamespace})
			return err
		}, "activity_id is required"},
		{"ByIdOfAWorkflowActivity", func() error {
			_, err := env.workflow.RecordActivityTaskHeartbeatById(ctx, &workflowservice.RecordActivityTaskHeartbeatByIdRequest{
				Namespace: testNamespace, ActivityId: "a-1", WorkflowId: "wf",
			})
			return err
		}, "workflow_id must be empty"},
		{"PollResultWithoutActivityID", func() error {
			_, err := env.workflow.PollActivityExecution(ctx, &workflowservice.PollActivityExecutionRequest{Namespace: testNamespace})
			return err
		}, "activity_id is required"},
		{"DescribeWithoutActivityID", func() error {
			_, err := env.workflow.DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{Namespace: testNamespace})
			return err
		}, "activity_id is required"},
		{"DescribeWithLongPollToken", func() error {
			_, err := env.workflow.DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{
				Namespace: testNamespace, ActivityId: "a-1", LongPollToken: []byte("t"),
			})
			return err
		}, "long_poll_token is not supported"},
		{"CancelWithoutActivityID", func() error {
			_, err := env.workflow.RequestCancelActivityExecution(ctx, &workflowservice.RequestCancelActivityExecutionRequest{Namespace: testNamespace})
			return err
		}, "activity_id is required"},
		{"NexusCompletedWithoutToken", func() error {
			_, err := env.workflow.RespondNexusTaskCompleted(ctx, &workflowservice.RespondNexusTaskCompletedRequest{Namespace: testNamespace})
			return err
		}, "task_token is required"},
		{"NexusCompletedWithAnActivityToken", func() error {
			_, err := env.workflow.RespondNexusTaskCompleted(ctx, &workflowservice.RespondNexusTaskCompletedRequest{
				Namespace: testNamespace, TaskToken: taskToken(t, env.ns.ID, "a-1", 1),
			})
			return err
		}, "task_token is not a worker-command task token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			require.Contains(t, status.Convert(err).Message(), tc.message)
		})
	}

	t.Run("PollsAreNeverInvalidArgument", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			req  *workflowservice.PollActivityTaskQueueRequest
			code codes.Code
		}{
			{"UnknownNamespace", &workflowservice.PollActivityTaskQueueRequest{Namespace: "nope", TaskQueue: &taskqueuepb.TaskQueue{Name: "tq"}}, codes.Unavailable},
			{"NoNamespace", &workflowservice.PollActivityTaskQueueRequest{TaskQueue: &taskqueuepb.TaskQueue{Name: "tq"}}, codes.Unavailable},
			{"NoTaskQueue", &workflowservice.PollActivityTaskQueueRequest{Namespace: testNamespace}, codes.FailedPrecondition},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := env.workflow.PollActivityTaskQueue(ctx, tc.req)
				require.Equal(t, tc.code, status.Code(err), "%v", err)
			})
		}
		_, err := env.workflow.PollNexusTaskQueue(ctx, &workflowservice.PollNexusTaskQueueRequest{
			Namespace: testNamespace, TaskQueue: &taskqueuepb.TaskQueue{Kind: enumspb.TASK_QUEUE_KIND_WORKER_COMMANDS},
		})
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	})
}

func activityPollRequest(key string) *workflowservice.PollActivityTaskQueueRequest {
	return &workflowservice.PollActivityTaskQueueRequest{
		Namespace:              testNamespace,
		TaskQueue:              &taskqueuepb.TaskQueue{Name: testTaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		Identity:               "1@host@",
		WorkerInstanceKey:      key,
		WorkerControlTaskQueue: testControlQueue,
	}
}

func taskRef(env *testEnv, activityID string, stamp int64) matching.ActivityTaskRef {
	return matching.ActivityTaskRef{NamespaceID: env.ns.ID, TaskQueue: testTaskQueue, ActivityID: activityID, RunID: "run-1", Stamp: stamp}
}

func startedResponse(t *testing.T, env *testEnv, activityID string, stamp int64) *activitypb.RecordActivityTaskStartedResponse {
	at := func(s int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2025, 1, 1, 0, 0, s, 0, time.UTC))
	}
	return &activitypb.RecordActivityTaskStartedResponse{
		TaskToken:                   taskToken(t, env.ns.ID, activityID, stamp),
		ActivityId:                  activityID,
		ActivityRunId:               "run-1",
		ActivityType:                &commonpb.ActivityType{Name: "charge"},
		Input:                       &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("in")}}},
		Header:                      &commonpb.Header{Fields: map[string]*commonpb.Payload{"k": {Data: []byte("v")}}},
		Namespace:                   testNamespace,
		ScheduledTime:               at(1),
		CurrentAttemptScheduledTime: at(2),
		StartedTime:                 at(3),
		Attempt:                     int32(stamp),
		ScheduleToCloseTimeout:      durationpb.New(time.Minute),
		StartToCloseTimeout:         durationpb.New(10 * time.Second),
		HeartbeatTimeout:            durationpb.New(2 * time.Second),
		HeartbeatDetails:            &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("progress")}}},
		RetryPolicy:                 &commonpb.RetryPolicy{MaximumAttempts: 3},
	}
}

func TestPollActivityTaskQueue(t *testing.T) {
	t.Parallel()

	t.Run("RecordsTheStartAndDeliversTheTask", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t)
		ref := taskRef(env, "a-1", 1)
		m.EXPECT().PollActivityTask(gomock.Any(), matching.ActivityPoll{
			NamespaceID: env.ns.ID, TaskQueue: testTaskQueue, Identity: "1@host@", WorkerInstanceKey: "w-1",
		}).Return(ref, true, nil)
		started := startedResponse(t, env, "a-1", 1)
		env.history.EXPECT().RecordActivityTaskStarted(gomock.Any(), gomock.Any()).DoAndReturn(
			func(_ context.Context, req *activitypb.RecordActivityTaskStartedRequest) (*activitypb.RecordActivityTaskStartedResponse, error) {
				require.NotEmpty(t, req.GetPollRequestId())
				req.PollRequestId = ""
				requireProtoEqual(t, &activitypb.RecordActivityTaskStartedRequest{
					NamespaceId: env.ns.ID, ActivityId: "a-1", RunId: "run-1", Stamp: 1,
					Identity: "1@host@", WorkerInstanceKey: "w-1", WorkerControlTaskQueue: testControlQueue,
				}, req)
				return started, nil
			})
		resp, err := env.workflow.PollActivityTaskQueue(context.Background(), activityPollRequest("w-1"))
		require.NoError(t, err)
		requireProtoEqual(t, &workflowservice.PollActivityTaskQueueResponse{
			TaskToken:                   started.TaskToken,
			WorkflowNamespace:           testNamespace,
			ActivityType:                started.ActivityType,
			ActivityId:                  "a-1",
			ActivityRunId:               "run-1",
			Header:                      started.Header,
			Input:                       started.Input,
			HeartbeatDetails:            started.HeartbeatDetails,
			ScheduledTime:               started.ScheduledTime,
			CurrentAttemptScheduledTime: started.CurrentAttemptScheduledTime,
			StartedTime:                 started.StartedTime,
			Attempt:                     1,
			ScheduleToCloseTimeout:      started.ScheduleToCloseTimeout,
			StartToCloseTimeout:         started.StartToCloseTimeout,
			HeartbeatTimeout:            started.HeartbeatTimeout,
			RetryPolicy:                 started.RetryPolicy,
		}, resp)
		require.Nil(t, resp.GetWorkflowExecution(), "a workflow_execution would switch the SDK into workflow-activity mode")
		require.Nil(t, resp.GetWorkflowType())
	})

	t.Run("StaleTaskIsSkippedAndMatchingPolledAgain", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t)
		stale, fresh := taskRef(env, "a-1", 1), taskRef(env, "a-2", 4)
		gomock.InOrder(
			m.EXPECT().PollActivityTask(gomock.Any(), gomock.Any()).Return(stale, true, nil),
			m.EXPECT().PollActivityTask(gomock.Any(), gomock.Any()).Return(fresh, true, nil),
		)
		var pollIDs []string
		env.history.EXPECT().RecordActivityTaskStarted(gomock.Any(), gomock.Any()).Times(2).DoAndReturn(
			func(_ context.Context, req *activitypb.RecordActivityTaskStartedRequest) (*activitypb.RecordActivityTaskStartedResponse, error) {
				pollIDs = append(pollIDs, req.GetPollRequestId())
				if req.GetActivityId() == "a-1" {
					return nil, serviceerror.NewNotFound("attempt with stamp 1 is no longer current")
				}
				return startedResponse(t, env, "a-2", 4), nil
			})
		resp, err := env.workflow.PollActivityTaskQueue(context.Background(), activityPollRequest("w-1"))
		require.NoError(t, err)
		require.Equal(t, "a-2", resp.GetActivityId())
		require.Len(t, pollIDs, 2)
		require.Equal(t, pollIDs[0], pollIDs[1], "one poll request ID for the whole poll")
	})

	t.Run("HistoryFailureReturnsTheTaskAndIsUnavailable", func(t *testing.T) {
		t.Parallel()
		for _, historyErr := range []error{
			serviceerror.NewUnavailable("shard moving"),
			serviceerror.NewInvalidArgument("would be fatal for the worker"),
			serviceerror.NewNamespaceNotFound("orders"),
		} {
			env, m := newActivityTestEnv(t)
			ref := taskRef(env, "a-1", 1)
			m.EXPECT().PollActivityTask(gomock.Any(), gomock.Any()).Return(ref, true, nil)
			env.history.EXPECT().RecordActivityTaskStarted(gomock.Any(), gomock.Any()).Return(nil, historyErr)
			m.EXPECT().ReturnActivityTask(ref).Return(nil)
			_, err := env.workflow.PollActivityTaskQueue(context.Background(), activityPollRequest("w-1"))
			requireCode(t, codes.Unavailable, err)
		}
	})

	t.Run("EmptyWhenMatchingHasNoTask", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t)
		m.EXPECT().PollActivityTask(gomock.Any(), gomock.Any()).Return(matching.ActivityTaskRef{}, false, nil)
		resp, err := env.workflow.PollActivityTaskQueue(context.Background(), activityPollRequest("w-1"))
		require.NoError(t, err)
		require.Empty(t, resp.GetTaskToken())
	})

	t.Run("WaitsAtMostTheLongPollTimeoutAndNeverPastTheClientDeadline", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t, WithLongPollTimeout(30*time.Second, time.Second))
		var deadlines []time.Time
		m.EXPECT().PollActivityTask(gomock.Any(), gomock.Any()).Times(2).DoAndReturn(
			func(ctx context.Context, _ matching.ActivityPoll) (matching.ActivityTaskRef, bool, error) {
				d, ok := ctx.Deadline()
				require.True(t, ok)
				deadlines = append(deadlines, d)
				return matching.ActivityTaskRef{}, false, nil
			})
		start := time.Now()
		_, err := env.workflow.PollActivityTaskQueue(context.Background(), activityPollRequest("w-1"))
		require.NoError(t, err)
		require.WithinDuration(t, start.Add(30*time.Second), deadlines[0], 5*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = env.workflow.PollActivityTaskQueue(ctx, activityPollRequest("w-1"))
		require.NoError(t, err)
		clientDeadline, _ := ctx.Deadline()
		require.Equal(t, clientDeadline.Add(-time.Second), deadlines[1], "the long-poll margin before the client's deadline")
	})

	t.Run("PollBoundEndingIsAnEmptyAnswer", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t)
		m.EXPECT().PollActivityTask(gomock.Any(), gomock.Any()).DoAndReturn(
			func(ctx context.Context, _ matching.ActivityPoll) (matching.ActivityTaskRef, bool, error) {
				<-ctx.Done()
				return matching.ActivityTaskRef{}, false, ctx.Err()
			})
		done := make(chan error, 1)
		go func() {
			resp, err := env.workflow.PollActivityTaskQueue(context.Background(), activityPollRequest("w-1"))
			if err == nil && len(resp.GetTaskToken()) > 0 {
				err = errors.New("got a task")
			}
			done <- err
		}()
		env.workflow.Stop()
		select {
		case err := <-done:
			require.NoError(t, err, "the server's stop answers the poll empty")
		case <-time.After(5 * time.Second):
			t.Fatal("poll did not end at Stop")
		}
	})

	t.Run("MatchingStoppedIsUnavailable", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t)
		m.EXPECT().PollActivityTask(gomock.Any(), gomock.Any()).Return(matching.ActivityTaskRef{}, false, matching.ErrStopped)
		_, err := env.workflow.PollActivityTaskQueue(context.Background(), activityPollRequest("w-1"))
		requireCode(t, codes.Unavailable, err)
	})

	t.Run("ClientGoneIsCanceled", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		m.EXPECT().PollActivityTask(gomock.Any(), gomock.Any()).DoAndReturn(
			func(ctx context.Context, _ matching.ActivityPoll) (matching.ActivityTaskRef, bool, error) {
				cancel()
				return matching.ActivityTaskRef{}, false, ctx.Err()
			})
		_, err := env.workflow.PollActivityTaskQueue(ctx, activityPollRequest("w-1"))
		requireCode(t, codes.Canceled, err)
	})

	t.Run("WithoutMatchingItIsAnEmptyLongPoll", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t, WithLongPollTimeout(50*time.Millisecond, 0))
		resp, err := env.workflow.PollActivityTaskQueue(context.Background(), activityPollRequest("w-1"))
		require.NoError(t, err)
		require.Empty(t, resp.GetTaskToken())
	})
}

func TestRespondActivityTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("TokenCallsReachHistory", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		token := taskToken(t, env.ns.ID, "a-1", 2)
		result := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("out")}}}
		failure := &failurepb.Failure{Message: "boom"}
		details := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("d")}}}

		env.history.EXPECT().RespondActivityTaskCompleted(gomock.Any(), protoMatcher(&activitypb.RespondActivityTaskCompletedRequest{
			NamespaceId: env.ns.ID, TaskToken: token, Result: result, Identity: "worker-1",
		})).Return(&activitypb.RespondActivityTaskCompletedResponse{}, nil)
		_, err := env.workflow.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{
			Namespace: testNamespace, TaskToken: token, Result: result, Identity: "worker-1",
		})
		require.NoError(t, err)

		env.history.EXPECT().RespondActivityTaskFailed(gomock.Any(), protoMatcher(&activitypb.RespondActivityTaskFailedRequest{
			NamespaceId: env.ns.ID, TaskToken: token, Failure: failure, LastHeartbeatDetails: details, Identity: "worker-1",
		})).Return(&activitypb.RespondActivityTaskFailedResponse{}, nil)
		_, err = env.workflow.RespondActivityTaskFailed(ctx, &workflowservice.RespondActivityTaskFailedRequest{
			Namespace: testNamespace, TaskToken: token, Failure: failure, LastHeartbeatDetails: details, Identity: "worker-1",
		})
		require.NoError(t, err)

		env.history.EXPECT().RespondActivityTaskCanceled(gomock.Any(), protoMatcher(&activitypb.RespondActivityTaskCanceledRequest{
			NamespaceId: env.ns.ID, TaskToken: token, Details: details, Identity: "worker-1",
		})).Return(&activitypb.RespondActivityTaskCanceledResponse{}, nil)
		_, err = env.workflow.RespondActivityTaskCanceled(ctx, &workflowservice.RespondActivityTaskCanceledRequest{
			Namespace: testNamespace, TaskToken: token, Details: details, Identity: "worker-1",
		})
		require.NoError(t, err)

		env.history.EXPECT().RecordActivityTaskHeartbeat(gomock.Any(), protoMatcher(&activitypb.RecordActivityTaskHeartbeatRequest{
			NamespaceId: env.ns.ID, TaskToken: token, Details: details, Identity: "worker-1",
		})).Return(&activitypb.RecordActivityTaskHeartbeatResponse{CancelRequested: true}, nil)
		hb, err := env.workflow.RecordActivityTaskHeartbeat(ctx, &workflowservice.RecordActivityTaskHeartbeatRequest{
			Namespace: testNamespace, TaskToken: token, Details: details, Identity: "worker-1",
		})
		require.NoError(t, err)
		require.True(t, hb.GetCancelRequested())
	})

	t.Run("StaleTokenIsNotFound", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		token := taskToken(t, env.ns.ID, "a-1", 1)
		env.history.EXPECT().RespondActivityTaskCompleted(gomock.Any(), gomock.Any()).Return(nil, serviceerror.NewNotFound("stale"))
		_, err := env.workflow.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{Namespace: testNamespace, TaskToken: token})
		requireCode(t, codes.NotFound, err)
		env.history.EXPECT().RecordActivityTaskHeartbeat(gomock.Any(), gomock.Any()).Return(nil, serviceerror.NewNotFound("stale"))
		_, err = env.workflow.RecordActivityTaskHeartbeat(ctx, &workflowservice.RecordActivityTaskHeartbeatRequest{Namespace: testNamespace, TaskToken: token})
		requireCode(t, codes.NotFound, err)
	})

	t.Run("ByIdUsesTheCurrentAttemptsToken", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		token := taskToken(t, env.ns.ID, "a-1", 3)
		describe := env.history.EXPECT().DescribeActivity(gomock.Any(), protoMatcher(&activitypb.DescribeActivityRequest{
			NamespaceId: env.ns.ID, ActivityId: "a-1", RunId: "run-1",
		})).Return(&activitypb.DescribeActivityResponse{RunId: "run-1", State: &activitypb.ActivityState{
			Status: activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, TaskToken: token,
		}}, nil)
		describe.Times(4)
		result := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("out")}}}
		env.history.EXPECT().RespondActivityTaskCompleted(gomock.Any(), protoMatcher(&activitypb.RespondActivityTaskCompletedRequest{
			NamespaceId: env.ns.ID, TaskToken: token, Result: result, Identity: "client",
		})).Return(&activitypb.RespondActivityTaskCompletedResponse{}, nil)
		_, err := env.workflow.RespondActivityTaskCompletedById(ctx, &workflowservice.RespondActivityTaskCompletedByIdRequest{
			Namespace: testNamespace, ActivityId: "a-1", RunId: "run-1", Result: result, Identity: "client",
		})
		require.NoError(t, err)
		env.history.EXPECT().RespondActivityTaskFailed(gomock.Any(), gomock.Any()).Return(&activitypb.RespondActivityTaskFailedResponse{}, nil)
		_, err = env.workflow.RespondActivityTaskFailedById(ctx, &workflowservice.RespondActivityTaskFailedByIdRequest{
			Namespace: testNamespace, ActivityId: "a-1", RunId: "run-1",
		})
		require.NoError(t, err)
		env.history.EXPECT().RespondActivityTaskCanceled(gomock.Any(), gomock.Any()).Return(&activitypb.RespondActivityTaskCanceledResponse{}, nil)
		_, err = env.workflow.RespondActivityTaskCanceledById(ctx, &workflowservice.RespondActivityTaskCanceledByIdRequest{
			Namespace: testNamespace, ActivityId: "a-1", RunId: "run-1",
		})
		require.NoError(t, err)
		env.history.EXPECT().RecordActivityTaskHeartbeat(gomock.Any(), gomock.Any()).Return(&activitypb.RecordActivityTaskHeartbeatResponse{CancelRequested: true}, nil)
		hb, err := env.workflow.RecordActivityTaskHeartbeatById(ctx, &workflowservice.RecordActivityTaskHeartbeatByIdRequest{
			Namespace: testNamespace, ActivityId: "a-1", RunId: "run-1",
		})
		require.NoError(t, err)
		require.True(t, hb.GetCancelRequested())
	})

	t.Run("ByIdWithoutARunningAttemptIsNotFound", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().DescribeActivity(gomock.Any(), gomock.Any()).Return(&activitypb.DescribeActivityResponse{
			RunId: "run-1", State: &activitypb.ActivityState{Status: activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED},
		}, nil)
		_, err := env.workflow.RespondActivityTaskCompletedById(ctx, &workflowservice.RespondActivityTaskCompletedByIdRequest{
			Namespace: testNamespace, ActivityId: "a-1",
		})
		requireCode(t, codes.NotFound, err)
	})
}

func TestPollActivityExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ReturnsTheOutcome", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		result := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("out")}}}
		env.history.EXPECT().PollActivityExecution(gomock.Any(), protoMatcher(&activitypb.PollActivityExecutionRequest{
			NamespaceId: env.ns.ID, ActivityId: "a-1", RunId: "run-1",
		})).Return(&activitypb.PollActivityExecutionResponse{
			RunId: "run-1", Outcome: &activitypb.ActivityOutcome{Value: &activitypb.ActivityOutcome_Result{Result: result}},
		}, nil)
		resp, err := env.workflow.PollActivityExecution(ctx, &workflowservice.PollActivityExecutionRequest{
			Namespace: testNamespace, ActivityId: "a-1", RunId: "run-1",
		})
		require.NoError(t, err)
		require.Equal(t, "run-1", resp.GetRunId())
		requireProtoEqual(t, result, resp.GetOutcome().GetResult())
	})

	t.Run("HistoryWaitsWithinTheClientDeadline", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		clientCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		clientDeadline, _ := clientCtx.Deadline()
		env.history.EXPECT().PollActivityExecution(gomock.Any(), gomock.Any()).DoAndReturn(
			func(ctx context.Context, _ *activitypb.PollActivityExecutionRequest) (*activitypb.PollActivityExecutionResponse, error) {
				d, ok := ctx.Deadline()
				require.True(t, ok)
				require.False(t, d.After(clientDeadline))
				return &activitypb.PollActivityExecutionResponse{RunId: "run-1"}, nil
			})
		resp, err := env.workflow.PollActivityExecution(clientCtx, &workflowservice.PollActivityExecutionRequest{
			Namespace: testNamespace, ActivityId: "a-1",
		})
		require.NoError(t, err)
		require.Nil(t, resp.GetOutcome(), "the SDK polls again")
	})

	t.Run("WaitEndingBeforeHistoryAnswersIsAnEmptyAnswer", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t, WithLongPollTimeout(50*time.Millisecond, 0))
		env.history.EXPECT().PollActivityExecution(gomock.Any(), gomock.Any()).DoAndReturn(
			func(ctx context.Context, _ *activitypb.PollActivityExecutionRequest) (*activitypb.PollActivityExecutionResponse, error) {
				<-ctx.Done()
				return nil, serviceerror.NewDeadlineExceeded("history did not answer")
			})
		resp, err := env.workflow.PollActivityExecution(ctx, &workflowservice.PollActivityExecutionRequest{
			Namespace: testNamespace, ActivityId: "a-1", RunId: "run-1",
		})
		require.NoError(t, err)
		require.Equal(t, "run-1", resp.GetRunId())
		require.Nil(t, resp.GetOutcome())
	})

	t.Run("NotFoundPassesThrough", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().PollActivityExecution(gomock.Any(), gomock.Any()).Return(nil, serviceerror.NewNotFound("no such activity"))
		_, err := env.workflow.PollActivityExecution(ctx, &workflowservice.PollActivityExecutionRequest{Namespace: testNamespace, ActivityId: "a-1"})
		requireCode(t, codes.NotFound, err)
	})
}

func TestDescribeActivityExecution(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	input := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("in")}}}
	details := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("d")}}}
	failure := &failurepb.Failure{Message: "last"}
	state := &activitypb.ActivityState{
		Status: activitypb.ActivityStatus_ACTIVITY_STATUS_FAILED, ActivityType: &commonpb.ActivityType{Name: "charge"},
		Input: input, HeartbeatDetails: details, LastFailure: failure, Attempt: 3,
		Outcome: &activitypb.ActivityOutcome{Value: &activitypb.ActivityOutcome_Failure{Failure: failure}},
	}
	env.history.EXPECT().DescribeActivity(gomock.Any(), gomock.Any()).Times(2).Return(&activitypb.DescribeActivityResponse{RunId: "run-1", State: state}, nil)

	bare, err := env.workflow.DescribeActivityExecution(context.Background(), &workflowservice.DescribeActivityExecutionRequest{
		Namespace: testNamespace, ActivityId: "a-1",
	})
	require.NoError(t, err)
	require.Equal(t, "run-1", bare.GetRunId())
	require.Equal(t, enumspb.ACTIVITY_EXECUTION_STATUS_FAILED, bare.GetInfo().GetStatus())
	require.Equal(t, int32(3), bare.GetInfo().GetAttempt())
	require.Nil(t, bare.GetInput())
	require.Nil(t, bare.GetOutcome())
	require.Nil(t, bare.GetInfo().GetHeartbeatDetails())
	require.Nil(t, bare.GetInfo().GetLastFailure())

	full, err := env.workflow.DescribeActivityExecution(context.Background(), &workflowservice.DescribeActivityExecutionRequest{
		Namespace: testNamespace, ActivityId: "a-1",
		IncludeInput: true, IncludeOutcome: true, IncludeHeartbeatDetails: true, IncludeLastFailure: true,
	})
	require.NoError(t, err)
	requireProtoEqual(t, input, full.GetInput())
	requireProtoEqual(t, &activityv1.ActivityExecutionOutcome{Value: &activityv1.ActivityExecutionOutcome_Failure{Failure: failure}}, full.GetOutcome())
	requireProtoEqual(t, details, full.GetInfo().GetHeartbeatDetails())
	requireProtoEqual(t, failure, full.GetInfo().GetLastFailure())
}

func TestRequestCancelActivityExecution(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.history.EXPECT().RequestCancelActivity(gomock.Any(), protoMatcher(&activitypb.RequestCancelActivityRequest{
		NamespaceId: env.ns.ID, ActivityId: "a-1", RunId: "run-1", RequestId: "req-1", Reason: "user", Identity: "client",
	})).Return(&activitypb.RequestCancelActivityResponse{}, nil)
	_, err := env.workflow.RequestCancelActivityExecution(context.Background(), &workflowservice.RequestCancelActivityExecutionRequest{
		Namespace: testNamespace, ActivityId: "a-1", RunId: "run-1", RequestId: "req-1", Reason: "user", Identity: "client",
	})
	require.NoError(t, err)

	env.history.EXPECT().RequestCancelActivity(gomock.Any(), gomock.Any()).Return(nil, serviceerror.NewFailedPrecondition("already completed"))
	_, err = env.workflow.RequestCancelActivityExecution(context.Background(), &workflowservice.RequestCancelActivityExecutionRequest{
		Namespace: testNamespace, ActivityId: "a-1",
	})
	requireCode(t, codes.FailedPrecondition, err)
}

func TestShutdownWorkerCompletesActivityPolls(t *testing.T) {
	t.Parallel()

	t.Run("TellsMatching", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t)
		m.EXPECT().CompletePollsOfWorker(env.ns.ID, "w-1").Return(2)
		env.history.EXPECT().ShutdownWorker(gomock.Any(), gomock.Any()).Return(&workerpb.ShutdownWorkerResponse{}, nil)
		_, err := env.workflow.ShutdownWorker(context.Background(), &workflowservice.ShutdownWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		require.NoError(t, err)
	})

	t.Run("OpenPollOfARealMatcherEndsEmpty", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		waiting := make(chan string, 16)
		matcher := matching.New(nil, matching.Options{TestHooks: &matching.TestHooks{PollWaiting: func(q string) { waiting <- q }}}, nil, nil)
		t.Cleanup(matcher.Stop)
		env.deps.Matching = matcher
		env.workflow = NewWorkflowHandler(env.deps)
		env.history.EXPECT().ShutdownWorker(gomock.Any(), gomock.Any()).Return(&workerpb.ShutdownWorkerResponse{}, nil)

		polled := make(chan error, 1)
		go func() {
			resp, err := env.workflow.PollActivityTaskQueue(context.Background(), activityPollRequest("w-1"))
			if err == nil && len(resp.GetTaskToken()) > 0 {
				err = errors.New("got a task")
			}
			polled <- err
		}()
		select {
		case <-waiting:
		case <-time.After(5 * time.Second):
			t.Fatal("the poll never reached matching")
		}
		_, err := env.workflow.ShutdownWorker(context.Background(), &workflowservice.ShutdownWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		require.NoError(t, err)
		select {
		case err := <-polled:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("the shut-down worker's activity poll was not completed")
		}
		// A poll that was already on its way when ShutdownWorker arrived ends at once too.
		resp, err := env.workflow.PollActivityTaskQueue(context.Background(), activityPollRequest("w-1"))
		require.NoError(t, err)
		require.Empty(t, resp.GetTaskToken())
	})

	t.Run("WorkflowPollAfterShutdownEndsAtOnce", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().ShutdownWorker(gomock.Any(), gomock.Any()).Return(&workerpb.ShutdownWorkerResponse{}, nil)
		_, err := env.workflow.ShutdownWorker(context.Background(), &workflowservice.ShutdownWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		require.NoError(t, err)
		start := time.Now()
		_, err = env.workflow.PollWorkflowTaskQueue(context.Background(), &workflowservice.PollWorkflowTaskQueueRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		require.NoError(t, err)
		require.Less(t, time.Since(start), 5*time.Second)
	})
}

// protoMatcher matches a proto message by proto.Equal.
func protoMatcher(want proto.Message) gomock.Matcher { return protoEq{want} }

type protoEq struct{ want proto.Message }

func (m protoEq) Matches(x any) bool {
	got, ok := x.(proto.Message)
	return ok && proto.Equal(m.want, got)
}

func (m protoEq) String() string { return "is equal to " + protoText(m.want) }
