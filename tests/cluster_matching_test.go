//go:build clustermerge

// This test needs the cluster branch (testcluster.NewHosts, Crash, WaitForOwnership,
// clusterShards). It passed on a trial merge of the matching and cluster branches; once merged,
// delete the build constraint above.

package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

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
