package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	sdkworker "go.temporal.io/sdk/worker"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/chasm/worker"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/tests/testcluster"
)

func TestSDKWorkerAppearsRunningThenShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{})
	c := dialSDK(t, cluster.Address())
	w := sdkworker.New(c, "orders", sdkworker.Options{})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "noop"})
	require.NoError(t, w.Start())

	listed := waitForWorker(t, c, `TaskQueue = "orders"`)
	ctx := context.Background()
	described, err := c.WorkflowService().DescribeWorker(ctx, &workflowservice.DescribeWorkerRequest{
		Namespace: "default", WorkerInstanceKey: listed.GetWorkerInstanceKey(),
	})
	require.NoError(t, err)
	hb := described.GetWorkerInfo().GetWorkerHeartbeat()
	require.Equal(t, enumspb.WORKER_STATUS_RUNNING, hb.GetStatus())
	require.Equal(t, "orders", hb.GetTaskQueue())
	require.NotEmpty(t, hb.GetWorkerIdentity())
	require.NotEmpty(t, hb.GetHostInfo().GetHostName())
	require.Equal(t, listed.GetWorkerIdentity(), hb.GetWorkerIdentity())
	require.Equal(t, listed.GetHostName(), hb.GetHostInfo().GetHostName())

	count, err := c.WorkflowService().CountWorkers(ctx, &workflowservice.CountWorkersRequest{Namespace: "default", Query: `Status = "Running"`})
	require.NoError(t, err)
	require.EqualValues(t, 1, count.GetCount())

	// The heartbeats show in the Prometheus endpoint.
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + cluster.HTTPAddress() + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return strings.Contains(string(body), metrics.WorkerHeartbeats.ExportedName()+" ") &&
			strings.Contains(string(body), metrics.WorkersByState.ExportedName()+`{state="ACTIVE"} 1`)
	}, 30*time.Second, 200*time.Millisecond, "worker metrics are exported")

	w.Stop()
	// SHUTDOWN in the public view at once: no waiting for a lease.
	described, err = c.WorkflowService().DescribeWorker(ctx, &workflowservice.DescribeWorkerRequest{
		Namespace: "default", WorkerInstanceKey: listed.GetWorkerInstanceKey(),
	})
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKER_STATUS_SHUTDOWN, described.GetWorkerInfo().GetWorkerHeartbeat().GetStatus())

	liveness, err := dialLiveness(t, cluster.Address()).DescribeWorkerLiveness(ctx, &livenesspb.DescribeWorkerLivenessRequest{
		Namespace: "default", WorkerInstanceKey: listed.GetWorkerInstanceKey(),
	})
	require.NoError(t, err)
	require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_INACTIVE, liveness.GetWorker().GetState())
	require.Equal(t, livenesspb.InactiveReason_INACTIVE_REASON_SHUTDOWN, liveness.GetWorker().GetInactiveReason())
}

func TestKilledSDKWorkerBecomesInactiveThenCleanedUp(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{DynamicConfig: map[dynamicconfig.Key]any{
		dynamicconfig.DefaultLeaseDuration.Key():       "3s",
		dynamicconfig.InactiveWorkerCleanupDelay.Key(): "2s",
		// The lease path: connection suspicion off (suspicion_test.go covers it).
		worker.SuspectGracePeriod.Key(): "0s",
	}})
	c := dialSDK(t, cluster.Address())
	liveness := dialLiveness(t, cluster.Address())
	ctx := context.Background()

	proc := startWorkerProcess(t, cluster.Address(), "payments", "doomed-worker")
	key := waitForWorker(t, c, `WorkerIdentity = "doomed-worker"`).GetWorkerInstanceKey()
	time.Sleep(1500 * time.Millisecond) // a few heartbeats: the lease adapts to 3 × 1 s

	require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
	killedAt := time.Now()
	describe := func() *livenesspb.WorkerLiveness {
		resp, err := liveness.DescribeWorkerLiveness(ctx, &livenesspb.DescribeWorkerLivenessRequest{Namespace: "default", WorkerInstanceKey: key})
		require.NoError(t, err)
		return resp.GetWorker()
	}
	require.Eventually(t, func() bool { return describe().GetState() == livenesspb.LivenessState_LIVENESS_STATE_INACTIVE },
		30*time.Second, 20*time.Millisecond)
	w := describe()
	require.Equal(t, livenesspb.InactiveReason_INACTIVE_REASON_LEASE_EXPIRED, w.GetInactiveReason())
	t.Logf("INACTIVE %v after SIGKILL (lease %v)", time.Since(killedAt).Round(time.Millisecond), w.GetLeaseDuration().AsDuration())

	public, err := c.WorkflowService().DescribeWorker(ctx, &workflowservice.DescribeWorkerRequest{Namespace: "default", WorkerInstanceKey: key})
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKER_STATUS_SHUTDOWN, public.GetWorkerInfo().GetWorkerHeartbeat().GetStatus(), "dead workers are not shown running")

	require.Eventually(t, func() bool { return describe().GetState() == livenesspb.LivenessState_LIVENESS_STATE_CLEANED_UP },
		30*time.Second, 20*time.Millisecond)
	require.Empty(t, listAll(t, c, `WorkerIdentity = "doomed-worker"`, 100), "gone from ListWorkers")
	_, err = c.WorkflowService().DescribeWorker(ctx, &workflowservice.DescribeWorkerRequest{Namespace: "default", WorkerInstanceKey: key})
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, err, &notFound)
}

func TestTwoWorkersOnOneClientAndPagination(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{})
	c := dialSDK(t, cluster.Address())
	const workers = 5
	for i := range workers {
		w := sdkworker.New(c, fmt.Sprintf("queue-%d", i), sdkworker.Options{})
		w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "noop"})
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}
	require.Eventually(t, func() bool {
		return len(listAll(t, c, `TaskQueue STARTS_WITH "queue-"`, 100)) == workers
	}, 30*time.Second, 50*time.Millisecond, "every worker of the client appears on its own")

	listed := listAll(t, c, `TaskQueue STARTS_WITH "queue-" AND Status = "Running"`, 2)
	seen := map[string]int{}
	for _, w := range listed {
		seen[w.GetWorkerInstanceKey()]++
	}
	require.Len(t, seen, workers)
	for key, n := range seen {
		require.Equal(t, 1, n, "worker %s listed more than once across pages", key)
	}
}
