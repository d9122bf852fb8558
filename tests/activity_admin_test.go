package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/vigilhq/vigil/tests/testcluster"
)

func listActivityIDs(t *testing.T, c client.Client, q string) []string {
	t.Helper()
	res, err := c.ListActivities(context.Background(), client.ListActivitiesOptions{Query: q})
	require.NoError(t, err, q)
	var ids []string
	for info, err := range res.Results {
		require.NoError(t, err, q)
		ids = append(ids, info.ActivityID)
	}
	return ids
}

// The SDK client's ListActivities, CountActivities and Terminate, and DeleteActivityExecution,
// against a server running one activity on a live worker and one nobody polls for.
func TestActivityListCountTerminateDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{})
	events := eventsFile(t)
	startActivityWorker(t, cluster.Address(), "q", "A", events, "")
	c := dialSDK(t, cluster.Address())
	ctx := context.Background()

	running := startActivity(t, c, "a-1", "q", time.Hour)
	waitForEvent(t, events, "A started a-1")
	startActivity(t, c, "a-2", "nobody-polls", 0)

	require.ElementsMatch(t, []string{"a-1", "a-2"}, listActivityIDs(t, c, ""))
	require.ElementsMatch(t, []string{"a-1"}, listActivityIDs(t, c, `TaskQueue = "q" AND ExecutionStatus = "Running"`))
	require.ElementsMatch(t, []string{"a-2"}, listActivityIDs(t, c, `ActivityType = "work" AND TaskQueue != "q"`))
	count, err := c.CountActivities(ctx, client.CountActivitiesOptions{Query: `ExecutionStatus = "Running"`})
	require.NoError(t, err)
	require.EqualValues(t, 2, count.Count)
	// The SDK's listing is lazy: the first result carries the server's answer.
	bad, err := c.ListActivities(ctx, client.ListActivitiesOptions{Query: `Bogus = "x"`})
	require.NoError(t, err)
	for _, err = range bad.Results {
		break
	}
	var invalid *serviceerror.InvalidArgument
	require.True(t, errors.As(err, &invalid), "a bad query is InvalidArgument: %v", err)

	// Terminate the running one: the outcome is TERMINATED at once, and its worker is told to
	// stop (its late result is refused: the activity stays TERMINATED).
	require.NoError(t, running.Terminate(ctx, client.TerminateActivityOptions{Reason: "operator"}))
	getCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var out string
	require.Error(t, running.Get(getCtx, &out), "a terminated activity has no result")
	waitForEvent(t, events, "A cancelled a-1")
	desc, err := running.Describe(ctx, client.DescribeActivityOptions{})
	require.NoError(t, err)
	require.Equal(t, enumspb.ACTIVITY_EXECUTION_STATUS_TERMINATED, desc.Status)
	require.ElementsMatch(t, []string{"a-1"}, listActivityIDs(t, c, `ExecutionStatus = "Terminated"`))

	// Delete: refused while running, then gone.
	wf := c.WorkflowService()
	_, err = wf.DeleteActivityExecution(ctx, &workflowservice.DeleteActivityExecutionRequest{Namespace: "default", ActivityId: "a-2"})
	var precondition *serviceerror.FailedPrecondition
	require.True(t, errors.As(err, &precondition), "deleting a running activity: %v", err)
	// Unavailable (retry) while the terminated attempt is still being unbound from A.
	for {
		_, err = wf.DeleteActivityExecution(ctx, &workflowservice.DeleteActivityExecutionRequest{Namespace: "default", ActivityId: "a-1"})
		var unavailable *serviceerror.Unavailable
		if !errors.As(err, &unavailable) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a-2"}, listActivityIDs(t, c, ""))
	_, err = wf.DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{Namespace: "default", ActivityId: "a-1"})
	var notFound *serviceerror.NotFound
	require.True(t, errors.As(err, &notFound), "a deleted activity: %v", err)
}
