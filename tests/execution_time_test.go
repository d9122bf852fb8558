package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/vigilhq/vigil/tests/testcluster"
)

// TestExecutionTimeIsTheScheduleTimePlusTheStartDelay: an activity started with a start delay
// may first run that long after it was scheduled. Describe and List both show that time as
// execution_time, and a query on ExecutionTime selects by it, as Temporal's API defines it;
// an activity without a delay has its schedule time there. After a restart that rebuilds the
// visibility tables (as a migration does), the query still selects the same activities.
func TestExecutionTimeIsTheScheduleTimePlusTheStartDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{})
	c := dialSDK(t, cluster.Address())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const queue = "execution-time-nobody-polls"
	delays := map[string]time.Duration{"now": 0, "in-an-hour": time.Hour}
	for id, delay := range delays {
		_, err := c.ExecuteActivity(ctx, client.StartActivityOptions{
			ID: id, TaskQueue: queue, StartToCloseTimeout: time.Minute, StartDelay: delay,
		}, "charge")
		require.NoError(t, err)
	}

	res, err := c.ListActivities(ctx, client.ListActivitiesOptions{Query: fmt.Sprintf("TaskQueue = %q", queue)})
	require.NoError(t, err)
	all := map[string]client.ActivityExecutionInfo{}
	for info, err := range res.Results {
		require.NoError(t, err)
		all[info.ActivityID] = *info
	}
	require.Len(t, all, 2)
	for id, delay := range delays {
		desc, err := c.GetActivityHandle(client.GetActivityHandleOptions{ActivityID: id}).Describe(ctx, client.DescribeActivityOptions{})
		require.NoError(t, err)
		require.Equal(t, desc.ScheduleTime.Add(delay), desc.ExecutionTime, "%s: Describe", id)
		require.Equal(t, desc.ExecutionTime, all[id].ExecutionTime, "%s: List shows what Describe does", id)
	}

	// Between the two: only the delayed activity may first run after it.
	between := all["now"].ScheduleTime.Add(30 * time.Minute).UTC().Format(time.RFC3339Nano)
	query := fmt.Sprintf("TaskQueue = %q AND ExecutionTime > %q", queue, between)
	require.Equal(t, []string{"in-an-hour"}, listActivityIDs(t, c, query))
	since := all["now"].ScheduleTime.Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	require.Equal(t, []string{"now"}, listActivityIDs(t, c,
		fmt.Sprintf("TaskQueue = %q AND StartTime > %q AND ExecutionTime < %q", queue, since, between)))

	path := cluster.Path()
	cluster.Stop()
	emptyVisibilityTables(t, ctx, path)
	cluster = testcluster.New(t, testcluster.Options{Path: path})
	c = dialSDK(t, cluster.Address())
	require.Equal(t, []string{"in-an-hour"}, listActivityIDs(t, c, query), "after the tables were rebuilt from the states")
}
