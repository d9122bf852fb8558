package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	adminpb "github.com/vigilhq/vigil/api/gen/adminpb/v1"
	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// TestSecurity_WorkerKeyHijack: principal B heartbeats and calls ShutdownWorker with A's worker
// key. Both are refused; A stays ACTIVE, with its identity and task queue; an admin may still
// act on A's worker.
func TestSecurity_WorkerKeyHijack(t *testing.T) {
	cluster := testcluster.New(t, testcluster.Options{Auth: auth.Config{Enabled: true, AdminAPIKey: testAdminKey}})
	dial := func(key string) *grpc.ClientConn {
		c, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()), bearer(key))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	admin := dial(testAdminKey)
	keyA, _ := createAPIKey(t, admin, "default", "worker")
	keyB, _ := createAPIKey(t, admin, "default", "worker")
	a, b := workflowservice.NewWorkflowServiceClient(dial(keyA)), workflowservice.NewWorkflowServiceClient(dial(keyB))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	beat := func(c workflowservice.WorkflowServiceClient, identity, taskQueue string) error {
		_, err := c.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{Namespace: "default",
			WorkerHeartbeat: []*workerv1.WorkerHeartbeat{{WorkerInstanceKey: "worker-a", WorkerIdentity: identity, TaskQueue: taskQueue}}})
		return err
	}
	require.NoError(t, beat(a, "a@host", "orders"))
	require.NoError(t, beat(a, "a@host", "orders"), "the owner heartbeats again")

	err := beat(b, "b@evil", "evil")
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	_, err = b.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: "default", WorkerInstanceKey: "worker-a", Reason: "hijack"})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)

	live := livenesspb.NewWorkerLivenessServiceClient(admin)
	w, err := live.DescribeWorkerLiveness(ctx, &livenesspb.DescribeWorkerLivenessRequest{Namespace: "default", WorkerInstanceKey: "worker-a"})
	require.NoError(t, err)
	require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_ACTIVE, w.GetWorker().GetState())
	require.Equal(t, "a@host", w.GetWorker().GetLastHeartbeat().GetWorkerIdentity())
	require.Equal(t, "orders", w.GetWorker().GetLastHeartbeat().GetTaskQueue())

	// B's own workers are B's.
	_, err = b.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{Namespace: "default",
		WorkerHeartbeat: []*workerv1.WorkerHeartbeat{{WorkerInstanceKey: "worker-b", WorkerIdentity: "b", TaskQueue: "q"}}})
	require.NoError(t, err)

	// The owner shuts its worker down; an admin could too.
	_, err = a.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: "default", WorkerInstanceKey: "worker-a", Reason: "done"})
	require.NoError(t, err)
	_, err = workflowservice.NewWorkflowServiceClient(admin).ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: "default", WorkerInstanceKey: "worker-b"})
	require.NoError(t, err)
	w, err = live.DescribeWorkerLiveness(ctx, &livenesspb.DescribeWorkerLivenessRequest{Namespace: "default", WorkerInstanceKey: "worker-a"})
	require.NoError(t, err)
	require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_INACTIVE, w.GetWorker().GetState())
}

// TestSecurity_TaskTokenOfAnotherPrincipal: a real task token is honoured only from the
// principal whose worker polled it.
func TestSecurity_TaskTokenOfAnotherPrincipal(t *testing.T) {
	cluster := testcluster.New(t, testcluster.Options{Auth: auth.Config{Enabled: true, AdminAPIKey: testAdminKey}})
	dial := func(key string) workflowservice.WorkflowServiceClient {
		c, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()), bearer(key))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return workflowservice.NewWorkflowServiceClient(c)
	}
	admin := dial(testAdminKey)
	keyA, _ := createAPIKey(t, adminConn(t, cluster.Address()), "default", "worker")
	keyB, _ := createAPIKey(t, adminConn(t, cluster.Address()), "default", "worker")
	a, b := dial(keyA), dial(keyB)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, err := admin.StartActivityExecution(ctx, &workflowservice.StartActivityExecutionRequest{Namespace: "default", ActivityId: "job",
		ActivityType: &commonpb.ActivityType{Name: "x"}, TaskQueue: &taskqueuepb.TaskQueue{Name: "tq"},
		StartToCloseTimeout: durationpb.New(time.Minute), RequestId: "r"})
	require.NoError(t, err)
	poll, err := a.PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: "tq"}})
	require.NoError(t, err)
	require.NotEmpty(t, poll.GetTaskToken())

	done := &workflowservice.RespondActivityTaskCompletedRequest{Namespace: "default", TaskToken: poll.GetTaskToken(),
		Result: &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte(`"stolen"`)}}}}
	_, err = b.RespondActivityTaskCompleted(ctx, done)
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	_, err = b.RecordActivityTaskHeartbeat(ctx, &workflowservice.RecordActivityTaskHeartbeatRequest{Namespace: "default", TaskToken: poll.GetTaskToken()})
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	desc, err := admin.DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{Namespace: "default", ActivityId: "job"})
	require.NoError(t, err)
	require.Equal(t, enumspb.PENDING_ACTIVITY_STATE_STARTED, desc.GetInfo().GetRunState())

	done.Result = &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte(`"mine"`)}}}
	_, err = a.RespondActivityTaskCompleted(ctx, done)
	require.NoError(t, err)
}

func adminConn(t *testing.T, address string) *grpc.ClientConn {
	c, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()), bearer(testAdminKey))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestSecurity_TaskTokenKeyRotation: after a rotation new tokens are signed with the new key,
// and a token handed out before it is still honoured.
func TestSecurity_TaskTokenKeyRotation(t *testing.T) {
	cluster := testcluster.New(t, testcluster.Options{Auth: auth.Config{Enabled: true, AdminAPIKey: testAdminKey}})
	conn := adminConn(t, cluster.Address())
	wf := workflowservice.NewWorkflowServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	startAndPoll := func(id string) []byte {
		_, err := wf.StartActivityExecution(ctx, &workflowservice.StartActivityExecutionRequest{Namespace: "default", ActivityId: id,
			ActivityType: &commonpb.ActivityType{Name: "x"}, TaskQueue: &taskqueuepb.TaskQueue{Name: "tq"},
			StartToCloseTimeout: durationpb.New(time.Minute), RequestId: id})
		require.NoError(t, err)
		poll, err := wf.PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: "tq"}})
		require.NoError(t, err)
		require.NotEmpty(t, poll.GetTaskToken())
		return poll.GetTaskToken()
	}
	before := startAndPoll("before")
	resp, err := adminpb.NewAdminServiceClient(conn).RotateTaskTokenKey(ctx, &adminpb.RotateTaskTokenKeyRequest{})
	require.NoError(t, err)
	require.Equal(t, int32(2), resp.GetVersion())
	after := startAndPoll("after")
	require.NotEqual(t, before[3:7], after[3:7], "the new token names the new key version")

	for _, token := range [][]byte{before, after} {
		_, err := wf.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{Namespace: "default", TaskToken: token})
		require.NoError(t, err)
	}
}
