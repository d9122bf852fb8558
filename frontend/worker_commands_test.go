package frontend

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	nexuspb "go.temporal.io/api/nexus/v1"
	workerservicepb "go.temporal.io/api/nexusservices/workerservice/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/matching"
)

func commandPollRequest() *workflowservice.PollNexusTaskQueueRequest {
	return &workflowservice.PollNexusTaskQueueRequest{
		Namespace:         testNamespace,
		TaskQueue:         &taskqueuepb.TaskQueue{Name: testControlQueue, Kind: enumspb.TASK_QUEUE_KIND_WORKER_COMMANDS},
		Identity:          "1@host@",
		WorkerInstanceKey: "shared-namespace-worker",
	}
}

// sdkCancelledTokens decodes a worker-command task as the SDK does (handleWorkerCommandTask)
// and returns the task tokens it would cancel.
func sdkCancelledTokens(t *testing.T, task *workflowservice.PollNexusTaskQueueResponse) [][]byte {
	t.Helper()
	require.NotEmpty(t, task.GetTaskToken(), "an empty token means no task to the SDK")
	require.NotNil(t, task.GetRequest(), "the SDK drops a task without a request")
	startOp := task.GetRequest().GetStartOperation()
	require.NotNil(t, startOp, "the SDK accepts only the start_operation variant")
	var req workerservicepb.ExecuteCommandsRequest
	require.NoError(t, proto.Unmarshal(startOp.GetPayload().GetData(), &req))
	var tokens [][]byte
	for _, cmd := range req.GetCommands() {
		cancel, ok := cmd.GetType().(*workerapipb.WorkerCommand_CancelActivity)
		require.True(t, ok, "unexpected command %T", cmd.GetType())
		tokens = append(tokens, cancel.CancelActivity.GetTaskToken())
	}
	return tokens
}

func TestEncodeCancelActivityCommand(t *testing.T) {
	t.Parallel()
	token := []byte("\x0a\x02ns\x12\x03a-1\x1a\x05run-1\x20\x03")
	payload, err := EncodeCancelActivityCommand(token)
	require.NoError(t, err)
	var req workerservicepb.ExecuteCommandsRequest
	require.NoError(t, proto.Unmarshal(payload, &req))
	require.Len(t, req.GetCommands(), 1)
	require.Equal(t, token, req.GetCommands()[0].GetCancelActivity().GetTaskToken())

	_, err = EncodeCancelActivityCommand(nil)
	require.Error(t, err)

	cmd, err := NewCancelActivityCommand(token)
	require.NoError(t, err)
	require.Equal(t, payload, cmd.Payload)
	require.Equal(t, CancelActivityCommandID(token), cmd.ID)
	again, err := NewCancelActivityCommand(append([]byte(nil), token...))
	require.NoError(t, err)
	require.Equal(t, cmd.ID, again.ID, "a resent command has the same ID, so matching deduplicates it")
	other, err := NewCancelActivityCommand(append(token, 1))
	require.NoError(t, err)
	require.NotEqual(t, cmd.ID, other.ID)
}

func TestCommandToken(t *testing.T) {
	t.Parallel()
	queue, id, err := decodeCommandToken(encodeCommandToken(testControlQueue, "cmd-1"))
	require.NoError(t, err)
	require.Equal(t, testControlQueue, queue)
	require.Equal(t, "cmd-1", id)
	for _, bad := range [][]byte{nil, []byte("garbage"), encodeCommandToken("", "cmd-1"), encodeCommandToken(testControlQueue, "")} {
		_, _, err := decodeCommandToken(bad)
		require.Error(t, err, "%q", bad)
	}
}

func TestPollNexusTaskQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DeliversACommandAsTheSDKExpectsIt", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t)
		cmd, err := NewCancelActivityCommand([]byte("token-1"))
		require.NoError(t, err)
		m.EXPECT().PollWorkerCommand(gomock.Any(), env.ns.ID, testControlQueue).Return(cmd, true, nil)
		task, err := env.workflow.PollNexusTaskQueue(ctx, commandPollRequest())
		require.NoError(t, err)
		require.Equal(t, [][]byte{[]byte("token-1")}, sdkCancelledTokens(t, task))
		startOp := task.GetRequest().GetStartOperation()
		require.Equal(t, "temporal.api.nexusservices.workerservice.v1.WorkerService", startOp.GetService())
		require.Equal(t, "ExecuteCommands", startOp.GetOperation())
		require.Equal(t, map[string][]byte{"encoding": []byte("binary/protobuf")}, startOp.GetPayload().GetMetadata())

		m.EXPECT().AckWorkerCommand(env.ns.ID, testControlQueue, cmd.ID).Return(true)
		_, err = env.workflow.RespondNexusTaskCompleted(ctx, &workflowservice.RespondNexusTaskCompletedRequest{
			Namespace: testNamespace, Identity: "1@host@", TaskToken: task.GetTaskToken(),
			Response: &nexuspb.Response{Variant: &nexuspb.Response_StartOperation{StartOperation: &nexuspb.StartOperationResponse{}}},
		})
		require.NoError(t, err)
	})

	t.Run("EmptyWhenNoCommand", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t)
		m.EXPECT().PollWorkerCommand(gomock.Any(), gomock.Any(), gomock.Any()).Return(matching.WorkerCommand{}, false, nil)
		task, err := env.workflow.PollNexusTaskQueue(ctx, commandPollRequest())
		require.NoError(t, err)
		require.Empty(t, task.GetTaskToken())
	})

	t.Run("UndecodableCommandIsDroppedAndThePollGoesOn", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t)
		good, err := NewCancelActivityCommand([]byte("token-2"))
		require.NoError(t, err)
		gomock.InOrder(
			m.EXPECT().PollWorkerCommand(gomock.Any(), gomock.Any(), gomock.Any()).Return(matching.WorkerCommand{ID: "bad", Payload: []byte{0xff, 0xff}}, true, nil),
			m.EXPECT().AckWorkerCommand(env.ns.ID, testControlQueue, "bad").Return(true),
			m.EXPECT().PollWorkerCommand(gomock.Any(), gomock.Any(), gomock.Any()).Return(good, true, nil),
		)
		task, err := env.workflow.PollNexusTaskQueue(ctx, commandPollRequest())
		require.NoError(t, err)
		require.Equal(t, [][]byte{[]byte("token-2")}, sdkCancelledTokens(t, task))
	})

	t.Run("FailedCommandIsAcknowledged", func(t *testing.T) {
		t.Parallel()
		env, m := newActivityTestEnv(t)
		m.EXPECT().AckWorkerCommand(env.ns.ID, testControlQueue, "cmd-1").Return(true)
		_, err := env.workflow.RespondNexusTaskFailed(ctx, &workflowservice.RespondNexusTaskFailedRequest{
			Namespace: testNamespace, TaskToken: encodeCommandToken(testControlQueue, "cmd-1"), Failure: &failurepb.Failure{Message: "nope"},
		})
		require.NoError(t, err)
	})

	t.Run("OtherNexusQueuesAreUnimplemented", func(t *testing.T) {
		t.Parallel()
		env, _ := newActivityTestEnv(t)
		req := commandPollRequest()
		req.TaskQueue.Kind = enumspb.TASK_QUEUE_KIND_NORMAL
		_, err := env.workflow.PollNexusTaskQueue(ctx, req)
		requireCode(t, codes.Unimplemented, err)
	})

	t.Run("UnknownNamespaceIsUnavailable", func(t *testing.T) {
		t.Parallel()
		env, _ := newActivityTestEnv(t)
		req := commandPollRequest()
		req.Namespace = "nope"
		_, err := env.workflow.PollNexusTaskQueue(ctx, req)
		requireCode(t, codes.Unavailable, err)
	})

	t.Run("WithoutMatchingItIsAnEmptyLongPoll", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t, WithLongPollTimeout(50*time.Millisecond, 0))
		task, err := env.workflow.PollNexusTaskQueue(ctx, commandPollRequest())
		require.NoError(t, err)
		require.Empty(t, task.GetTaskToken())
	})

	t.Run("RoundTripThroughARealMatcher", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		matcher := matching.New(nil, matching.Options{}, nil, nil)
		t.Cleanup(matcher.Stop)
		env.deps.Matching = matcher
		env.workflow = NewWorkflowHandler(env.deps)

		// What the server's activity.CommandSender does.
		cmd, err := NewCancelActivityCommand([]byte("token-3"))
		require.NoError(t, err)
		require.NoError(t, matcher.AddWorkerCommand(env.ns.ID, testControlQueue, cmd))

		task, err := env.workflow.PollNexusTaskQueue(ctx, commandPollRequest())
		require.NoError(t, err)
		require.Equal(t, [][]byte{[]byte("token-3")}, sdkCancelledTokens(t, task))
		_, err = env.workflow.RespondNexusTaskCompleted(ctx, &workflowservice.RespondNexusTaskCompletedRequest{
			Namespace: testNamespace, TaskToken: task.GetTaskToken(),
		})
		require.NoError(t, err)
		require.False(t, matcher.AckWorkerCommand(env.ns.ID, testControlQueue, cmd.ID), "the command was acknowledged")
	})
}
