package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// TestClusterActivitiesAcrossHosts: workers poll through host 1, activities are started
// through host 3, and the task queues' owners are spread over the three hosts: every activity
// runs and returns. Then the host owning some queues crashes; activities started afterwards
// still run.
func TestClusterActivitiesAcrossHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	hosts := testcluster.NewHosts(t, 3, testcluster.Options{NumShards: clusterShards})
	cw, err := client.Dial(client.Options{HostPort: hosts[0].Address(), Identity: "W", Logger: quietLogger{}})
	require.NoError(t, err)
	defer cw.Close()
	const queues = 6
	for i := range queues {
		w := sdkworker.New(cw, fmt.Sprintf("q-%d", i), sdkworker.Options{})
		w.RegisterActivityWithOptions(func(ctx context.Context, hold time.Duration) (string, error) {
			return "done " + activity.GetInfo(ctx).ActivityID, nil
		}, activity.RegisterOptions{Name: "work"})
		require.NoError(t, w.Start())
		defer w.Stop()
	}
	run := func(c client.Client, round string) {
		var handles []client.ActivityHandle
		for i := range queues {
			handles = append(handles, startActivity(t, c, fmt.Sprintf("%s-%d", round, i), fmt.Sprintf("q-%d", i), 0))
		}
		for i, h := range handles {
			require.Equal(t, fmt.Sprintf("done %s-%d", round, i), result(t, h))
		}
	}
	c3 := dialSDK(t, hosts[2].Address())
	run(c3, "before")
	hosts[1].Crash()
	testcluster.WaitForOwnership(t, hosts[0], hosts[2])
	run(c3, "after")
}

// TestClusterQueuedTasksSurviveOwnerCrash: activities are queued on a task queue owned by host
// 2 while no worker polls it; host 2 crashes, taking its in-memory queue with it. Once the
// members settle, the shards' owners re-queue them on the new owner, and a worker that starts
// polling then runs every one.
func TestClusterQueuedTasksSurviveOwnerCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	hosts := testcluster.NewHosts(t, 3, testcluster.Options{NumShards: clusterShards})
	members := hosts[0].Server().Engine().Membership().Members()
	crashed := hosts[1].Server().Engine().Membership().Self().ID
	var q string
	for i := 0; ; i++ {
		q = fmt.Sprintf("q-%d", i)
		if h, _ := membership.Owner(membership.TaskQueueKey(namespace.DeriveID("default"), q), members); h.ID == crashed {
			break
		}
	}
	c3 := dialSDK(t, hosts[2].Address())
	const n = 10
	var handles []client.ActivityHandle
	for i := range n {
		handles = append(handles, startActivity(t, c3, fmt.Sprintf("queued-%d", i), q, 0))
	}
	hosts[1].Crash()
	testcluster.WaitForOwnership(t, hosts[0], hosts[2])

	cw, err := client.Dial(client.Options{HostPort: hosts[0].Address(), Identity: "W", Logger: quietLogger{}})
	require.NoError(t, err)
	defer cw.Close()
	w := sdkworker.New(cw, q, sdkworker.Options{})
	w.RegisterActivityWithOptions(func(ctx context.Context, hold time.Duration) (string, error) {
		return "done " + activity.GetInfo(ctx).ActivityID, nil
	}, activity.RegisterOptions{Name: "work"})
	require.NoError(t, w.Start())
	defer w.Stop()
	start := time.Now()
	for i, h := range handles {
		require.Equal(t, fmt.Sprintf("done queued-%d", i), result(t, h))
	}
	t.Logf("all %d queued activities ran %v after the worker started", n, time.Since(start).Round(time.Millisecond))
}

// TestClusterDescribeTaskQueueThroughAnyHost: a worker polls through host 1 a queue that host 2
// owns, and the queue is described through host 1, which forwards to the owner: the worker is
// listed, and ListTaskQueuePartitions names host 2.
func TestClusterDescribeTaskQueueThroughAnyHost(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	hosts := testcluster.NewHosts(t, 2, testcluster.Options{NumShards: clusterShards})
	members := hosts[0].Server().Engine().Membership().Members()
	owner := hosts[1].Server().Engine().Membership().Self().ID
	var q string
	for i := 0; ; i++ {
		q = fmt.Sprintf("described-%d", i)
		if h, _ := membership.Owner(membership.TaskQueueKey(namespace.DeriveID("default"), q), members); h.ID == owner {
			break
		}
	}
	c, err := client.Dial(client.Options{HostPort: hosts[0].Address(), Identity: "described-worker", Logger: quietLogger{}})
	require.NoError(t, err)
	defer c.Close()
	w := sdkworker.New(c, q, sdkworker.Options{DisableWorkflowWorker: true})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "noop"})
	require.NoError(t, w.Start())
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.Eventually(t, func() bool {
		resp, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: q}, TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY})
		return err == nil && len(resp.GetPollers()) == 1 && resp.GetPollers()[0].GetIdentity() == "described-worker"
	}, 30*time.Second, 50*time.Millisecond, "the owner's poller list, through a host that does not own the queue")
	parts, err := c.WorkflowService().ListTaskQueuePartitions(ctx, &workflowservice.ListTaskQueuePartitionsRequest{
		Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: q}})
	require.NoError(t, err)
	require.Len(t, parts.GetActivityTaskQueuePartitions(), 1)
	require.Equal(t, owner, parts.GetActivityTaskQueuePartitions()[0].GetOwnerHostName())
}
