package frontend_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	activityv1 "go.temporal.io/api/activity/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/vigilhq/vigil/frontend/namespace"
)

// attemptSeen is one attempt as the activity saw it.
type attemptSeen struct {
	number int32
	cause  string // why its context ended ("" while it runs)
}

// TestSDKActivityPauseUnpauseReset pauses, unpauses and resets standalone activities run by a
// stock SDK worker, through the requests `temporal activity pause/unpause/reset` sends (the
// workflow-activity forms) and the standalone forms. The worker learns of a pause or reset
// from its heartbeat's answer, stops the attempt, and the server applies it.
func TestSDKActivityPauseUnpauseReset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a history host and an SDK worker")
	}
	t.Parallel()
	c := startActivityE2E(t)
	var release atomic.Bool
	attempts := make(chan attemptSeen, 16)
	w := sdkworker.New(c, "e2e-operator", sdkworker.Options{DisableWorkflowWorker: true})
	w.RegisterActivityWithOptions(func(ctx context.Context) (string, error) {
		n := activity.GetInfo(ctx).Attempt
		if release.Load() {
			return "done", nil
		}
		attempts <- attemptSeen{number: n}
		for {
			activity.RecordHeartbeat(ctx, "progress")
			select {
			case <-ctx.Done():
				attempts <- attemptSeen{number: n, cause: context.Cause(ctx).Error()}
				return "", ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}, activity.RegisterOptions{Name: "long"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	svc := c.WorkflowService()
	next := func(t *testing.T) attemptSeen {
		t.Helper()
		select {
		case a := <-attempts:
			return a
		case <-ctx.Done():
			t.Fatal("no attempt reported")
		}
		return attemptSeen{}
	}
	start := func(t *testing.T, id string) client.ActivityHandle {
		t.Helper()
		release.Store(false)
		// The heartbeat timeout is long beside the SDK's heartbeat interval (0.8 of it) on a
		// loaded machine: an attempt that timed out would be retried under a new stamp before
		// its heartbeat could learn of the pause or reset.
		handle, err := c.ExecuteActivity(ctx, client.StartActivityOptions{
			ID: id, TaskQueue: "e2e-operator", StartToCloseTimeout: 60 * time.Second, HeartbeatTimeout: 5 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 5},
		}, "long")
		require.NoError(t, err)
		require.Equal(t, attemptSeen{number: 1}, next(t))
		return handle
	}
	runState := func(id string) enumspb.PendingActivityState {
		resp, err := svc.DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{Namespace: namespace.DefaultName, ActivityId: id})
		if err != nil {
			return enumspb.PENDING_ACTIVITY_STATE_UNSPECIFIED
		}
		return resp.GetInfo().GetRunState()
	}

	t.Run("PauseThenUnpause", func(t *testing.T) {
		handle := start(t, "pause-1")
		// What `temporal activity pause --activity-id pause-1 --workflow-id ""` sends.
		_, err := svc.PauseActivity(ctx, &workflowservice.PauseActivityRequest{
			Namespace: namespace.DefaultName, Execution: &commonpb.WorkflowExecution{},
			Activity: &workflowservice.PauseActivityRequest_Id{Id: "pause-1"}, Identity: "ops",
		})
		require.NoError(t, err)
		stopped := next(t)
		require.Equal(t, int32(1), stopped.number)
		require.Contains(t, stopped.cause, "paused")
		require.Eventually(t, func() bool { return runState("pause-1") == enumspb.PENDING_ACTIVITY_STATE_PAUSED },
			30*time.Second, 20*time.Millisecond)

		// Pausing again is refused; an unknown workflow_id is refused.
		_, err = svc.PauseActivity(ctx, &workflowservice.PauseActivityRequest{
			Namespace: namespace.DefaultName, Activity: &workflowservice.PauseActivityRequest_Id{Id: "pause-1"}})
		var precondition *serviceerror.FailedPrecondition
		require.ErrorAs(t, err, &precondition)
		_, err = svc.UnpauseActivity(ctx, &workflowservice.UnpauseActivityRequest{
			Namespace: namespace.DefaultName, Execution: &commonpb.WorkflowExecution{WorkflowId: "some-workflow"},
			Activity: &workflowservice.UnpauseActivityRequest_Id{Id: "pause-1"}})
		var invalid *serviceerror.InvalidArgument
		require.ErrorAs(t, err, &invalid)

		// What `temporal activity unpause --activity-id pause-1 --workflow-id pause-1` sends.
		release.Store(true)
		_, err = svc.UnpauseActivity(ctx, &workflowservice.UnpauseActivityRequest{
			Namespace: namespace.DefaultName, Execution: &commonpb.WorkflowExecution{WorkflowId: "pause-1"},
			Activity: &workflowservice.UnpauseActivityRequest_Id{Id: "pause-1"}, Jitter: durationpb.New(0),
		})
		require.NoError(t, err)
		var out string
		require.NoError(t, handle.Get(ctx, &out))
		require.Equal(t, "done", out)

		// The durable host counts the committed changes (at least the start, the dispatch,
		// two attempts' starts, the pause, the unpause and the completion); Describe and List
		// read the same stored count. The worker's unbind can still commit after the result,
		// so each read sees at least the count of the read before it.
		describe := func() int64 {
			described, err := svc.DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{
				Namespace: namespace.DefaultName, ActivityId: "pause-1"})
			require.NoError(t, err)
			return described.GetInfo().GetStateTransitionCount()
		}
		count := describe()
		require.GreaterOrEqual(t, count, int64(7))
		listed, err := svc.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{
			Namespace: namespace.DefaultName, Query: `ActivityId = "pause-1"`})
		require.NoError(t, err)
		require.Len(t, listed.GetExecutions(), 1)
		listedCount := listed.GetExecutions()[0].GetStateTransitionCount()
		require.GreaterOrEqual(t, listedCount, count)
		require.GreaterOrEqual(t, describe(), listedCount)
	})

	t.Run("ResetRunningAttempt", func(t *testing.T) {
		handle := start(t, "reset-1")
		_, err := svc.ResetActivityExecution(ctx, &workflowservice.ResetActivityExecutionRequest{
			Namespace: namespace.DefaultName, ActivityId: "reset-1", Identity: "ops",
		})
		require.NoError(t, err)
		stopped := next(t)
		require.True(t, strings.Contains(stopped.cause, "reset"), "cause %q", stopped.cause)
		// Started over at attempt 1.
		require.Equal(t, attemptSeen{number: 1}, next(t))

		// Options change while it runs; then it completes.
		resp, err := svc.UpdateActivityExecutionOptions(ctx, &workflowservice.UpdateActivityExecutionOptionsRequest{
			Namespace: namespace.DefaultName, ActivityId: "reset-1",
			ActivityOptions: &activityv1.ActivityOptions{RetryPolicy: &commonpb.RetryPolicy{MaximumAttempts: 9}},
			UpdateMask:      &fieldmaskpb.FieldMask{Paths: []string{"retry_policy.maximum_attempts"}},
		})
		require.NoError(t, err)
		require.EqualValues(t, 9, resp.GetActivityOptions().GetRetryPolicy().GetMaximumAttempts())
		release.Store(true)
		_, err = svc.PauseActivityExecution(ctx, &workflowservice.PauseActivityExecutionRequest{
			Namespace: namespace.DefaultName, ActivityId: "reset-1"})
		require.NoError(t, err)
		require.Contains(t, next(t).cause, "paused")
		_, err = svc.UnpauseActivityExecution(ctx, &workflowservice.UnpauseActivityExecutionRequest{
			Namespace: namespace.DefaultName, ActivityId: "reset-1"})
		require.NoError(t, err)
		var out string
		require.NoError(t, handle.Get(ctx, &out))
		require.Equal(t, "done", out)
	})
}
