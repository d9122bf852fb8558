package frontend_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/frontend/namespace"
)

// TestAdvertisedCapabilities exercises, through the public API on a real history host, each
// capability GetSystemInfo advertises beyond error differentiation (tested with the error
// mapping): an SDK relies on each one as soon as it is advertised.
func TestAdvertisedCapabilities(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a history host")
	}
	t.Parallel()
	svc := startActivityE2E(t).WorkflowService()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	info, err := svc.GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{})
	require.NoError(t, err)
	require.True(t, info.GetCapabilities().GetActivityFailureIncludeHeartbeat())
	require.True(t, info.GetCapabilities().GetEncodedFailureAttributes())

	start := func(t *testing.T, id string, maxAttempts int32) {
		t.Helper()
		_, err := svc.StartActivityExecution(ctx, &workflowservice.StartActivityExecutionRequest{
			Namespace: namespace.DefaultName, ActivityId: id, RequestId: id,
			ActivityType:        &commonpb.ActivityType{Name: "capability"},
			TaskQueue:           &taskqueuepb.TaskQueue{Name: id},
			StartToCloseTimeout: durationpb.New(30 * time.Second),
			RetryPolicy: &commonpb.RetryPolicy{
				InitialInterval: durationpb.New(time.Millisecond), MaximumAttempts: maxAttempts},
		})
		require.NoError(t, err)
	}
	poll := func(t *testing.T, queue string) *workflowservice.PollActivityTaskQueueResponse {
		t.Helper()
		for {
			task, err := svc.PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{
				Namespace: namespace.DefaultName, TaskQueue: &taskqueuepb.TaskQueue{Name: queue}, Identity: "capability-worker",
			})
			require.NoError(t, err)
			if len(task.GetTaskToken()) > 0 {
				return task
			}
		}
	}
	payloads := func(s string) *commonpb.Payloads {
		return &commonpb.Payloads{Payloads: []*commonpb.Payload{{
			Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(s)}}}
	}

	t.Run("ActivityFailureIncludeHeartbeat", func(t *testing.T) {
		start(t, "cap-heartbeat", 0)
		first := poll(t, "cap-heartbeat")
		require.EqualValues(t, 1, first.GetAttempt())
		_, err := svc.RespondActivityTaskFailed(ctx, &workflowservice.RespondActivityTaskFailedRequest{
			Namespace: namespace.DefaultName, TaskToken: first.GetTaskToken(), Identity: "capability-worker",
			Failure:              &failurepb.Failure{Message: "try again"},
			LastHeartbeatDetails: payloads(`"progress 7"`),
		})
		require.NoError(t, err)

		second := poll(t, "cap-heartbeat")
		require.EqualValues(t, 2, second.GetAttempt())
		require.True(t, proto.Equal(payloads(`"progress 7"`), second.GetHeartbeatDetails()),
			"the next attempt resumes from the details sent with the failure, got %v", second.GetHeartbeatDetails())
		described, err := svc.DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{
			Namespace: namespace.DefaultName, ActivityId: "cap-heartbeat", IncludeHeartbeatDetails: true})
		require.NoError(t, err)
		require.True(t, proto.Equal(payloads(`"progress 7"`), described.GetInfo().GetHeartbeatDetails()))
	})

	t.Run("EncodedFailureAttributes", func(t *testing.T) {
		start(t, "cap-encoded", 1)
		task := poll(t, "cap-encoded")
		encoded := &commonpb.Payload{
			Metadata: map[string][]byte{"encoding": []byte("binary/encrypted")}, Data: []byte("sealed message and stack")}
		_, err := svc.RespondActivityTaskFailed(ctx, &workflowservice.RespondActivityTaskFailedRequest{
			Namespace: namespace.DefaultName, TaskToken: task.GetTaskToken(), Identity: "capability-worker",
			Failure: &failurepb.Failure{Message: "Encoded failure", EncodedAttributes: encoded},
		})
		require.NoError(t, err)

		outcome, err := svc.PollActivityExecution(ctx, &workflowservice.PollActivityExecutionRequest{
			Namespace: namespace.DefaultName, ActivityId: "cap-encoded"})
		require.NoError(t, err)
		failure := outcome.GetOutcome().GetFailure()
		require.NotNil(t, failure, "the activity failed for good after its one attempt")
		for failure.GetEncodedAttributes() == nil && failure.GetCause() != nil {
			failure = failure.GetCause()
		}
		require.True(t, proto.Equal(encoded, failure.GetEncodedAttributes()),
			"the encoded attributes come back as sent, got %v", outcome.GetOutcome().GetFailure())
	})
}
