package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// TestSecurity_ForgedTaskTokens: a token built from public information, and a real token with a
// field changed, are both refused, and the activity runs on untouched.
func TestSecurity_ForgedTaskTokens(t *testing.T) {
	cluster := testcluster.New(t, testcluster.Options{})
	conn, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	wf := workflowservice.NewWorkflowServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	start, err := wf.StartActivityExecution(ctx, &workflowservice.StartActivityExecutionRequest{
		Namespace: "default", ActivityId: "victim", ActivityType: &commonpb.ActivityType{Name: "x"},
		TaskQueue: &taskqueuepb.TaskQueue{Name: "tq"}, StartToCloseTimeout: durationpb.New(time.Minute), RequestId: "r1"})
	require.NoError(t, err)
	poll, err := wf.PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{
		Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: "tq"}, Identity: "owner"})
	require.NoError(t, err)
	require.NotEmpty(t, poll.GetTaskToken())

	ns, err := namespace.MustNewRegistry().GetByName("default")
	require.NoError(t, err)
	forged, err := activity.EncodeTaskToken(&activitypb.TaskToken{NamespaceId: ns.ID, ActivityId: "victim", RunId: start.GetRunId(), Stamp: 1, Attempt: 1})
	require.NoError(t, err)
	altered := append([]byte(nil), poll.GetTaskToken()...)
	altered[len(altered)-1] ^= 1 // the attempt field, the last one encoded
	truncated := poll.GetTaskToken()[:len(poll.GetTaskToken())-1]

	for name, token := range map[string][]byte{"Forged": forged, "Altered": altered, "Truncated": truncated} {
		t.Run(name, func(t *testing.T) {
			_, err := wf.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{
				Namespace: "default", TaskToken: token, Identity: "attacker",
				Result: &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte(`"forged"`)}}}})
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			require.NotContains(t, status.Convert(err).Message(), ns.ID, "the message leaks no internal ID")
			require.NotContains(t, status.Convert(err).Message(), start.GetRunId())
			_, err = wf.RecordActivityTaskHeartbeat(ctx, &workflowservice.RecordActivityTaskHeartbeatRequest{Namespace: "default", TaskToken: token})
			require.Equal(t, codes.InvalidArgument, status.Code(err))
		})
	}
	desc, err := wf.DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{Namespace: "default", ActivityId: "victim"})
	require.NoError(t, err)
	require.Equal(t, enumspb.PENDING_ACTIVITY_STATE_STARTED, desc.GetInfo().GetRunState(), "the activity is still running")

	// The real token still works.
	_, err = wf.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{
		Namespace: "default", TaskToken: poll.GetTaskToken(), Identity: "owner",
		Result: &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte(`"real"`)}}}})
	require.NoError(t, err)
}
