package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/vigilhq/vigil/tests/testcluster"
)

// temporalCLIVersion is the `temporal` CLI this test is written against; .ci/run builds it.
const temporalCLIVersion = "v1.5.1"

// temporalCLI is the `temporal` CLI binary: $VIGIL_TEMPORAL_CLI, else `temporal` on PATH.
// Build it with `go install github.com/temporalio/cli/cmd/temporal@v1.5.1` (through the Go
// module proxy; it takes minutes). Without one the test is skipped, except under CI=true,
// where it fails: CI builds the CLI, so a missing binary is a broken CI, not a reason to skip.
func temporalCLI(t *testing.T) string {
	if p := os.Getenv("VIGIL_TEMPORAL_CLI"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("VIGIL_TEMPORAL_CLI=%s: %v", p, err)
		}
		return p
	}
	p, err := exec.LookPath("temporal")
	if err != nil {
		msg := "no temporal CLI: set VIGIL_TEMPORAL_CLI or put temporal on PATH (go install github.com/temporalio/cli/cmd/temporal@" + temporalCLIVersion + ")"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// TestTemporalCLI drives the real `temporal` CLI against an in-process server: cluster health,
// namespaces created, listed, described and updated, search attributes created, listed and
// removed, workers listed, and a standalone activity
// run by a stock SDK worker paused, unpaused, reset, given new options and completed.
func TestTemporalCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	bin := temporalCLI(t)
	cluster := testcluster.New(t, testcluster.Options{Namespaces: []string{"orders"}})
	temporal := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append(args, "--address", cluster.Address())...).CombinedOutput()
		return string(out), err
	}
	mustRun := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := temporal(args...)
		require.NoError(t, err, "temporal %s: %s", strings.Join(args, " "), out)
		return out
	}

	t.Run("ClusterHealth", func(t *testing.T) {
		out := mustRun(t, "operator", "cluster", "health")
		require.Contains(t, out, "SERVING")
		require.NotContains(t, out, "NOT_SERVING")
	})

	t.Run("Namespaces", func(t *testing.T) {
		out := mustRun(t, "operator", "namespace", "describe", "-n", "default")
		require.Regexp(t, `ReplicationConfig.ActiveClusterName\s+active`, out)
		require.Regexp(t, `NamespaceInfo.State\s+Registered`, out)

		mustRun(t, "operator", "namespace", "create", "-n", "fresh",
			"--description", "made by the CLI", "--email", "ops@example.com", "--retention", "72h")
		out, err := temporal("operator", "namespace", "create", "-n", "orders")
		require.Error(t, err, out)
		require.Contains(t, out, "already exists")

		out = mustRun(t, "operator", "namespace", "list")
		require.Regexp(t, `NamespaceInfo.Name\s+default`, out)
		require.Regexp(t, `NamespaceInfo.Name\s+orders`, out)
		require.Regexp(t, `NamespaceInfo.Name\s+fresh`, out)

		out = mustRun(t, "operator", "namespace", "describe", "-n", "fresh")
		require.Regexp(t, `NamespaceInfo.Description\s+made by the CLI`, out)
		require.Regexp(t, `NamespaceInfo.OwnerEmail\s+ops@example.com`, out)
		require.Regexp(t, `Config.WorkflowExecutionRetentionTtl\s+72h0m0s`, out)

		mustRun(t, "operator", "namespace", "update", "-n", "fresh", "--description", "changed", "--data", "team=payments")
		out = mustRun(t, "operator", "namespace", "describe", "-n", "fresh")
		require.Regexp(t, `NamespaceInfo.Description\s+changed`, out)
		require.Regexp(t, `NamespaceInfo.OwnerEmail\s+ops@example.com`, out, "what the update leaves out is kept")
		require.Contains(t, out, "team:payments")

		// The new namespace serves at once.
		c, err := client.Dial(client.Options{HostPort: cluster.Address(), Namespace: "fresh", Logger: quietLogger{}})
		require.NoError(t, err)
		defer c.Close()
		_, err = c.ListActivities(context.Background(), client.ListActivitiesOptions{})
		require.NoError(t, err)
	})

	t.Run("SearchAttributes", func(t *testing.T) {
		mustRun(t, "operator", "search-attribute", "create", "-n", "orders",
			"--name", "CustomerId", "--type", "Keyword", "--name", "Amount", "--type", "Int")
		// Again with the same type: accepted, as Temporal does.
		mustRun(t, "operator", "search-attribute", "create", "-n", "orders", "--name", "Amount", "--type", "Int")
		out, err := temporal("operator", "search-attribute", "create", "-n", "orders", "--name", "ActivityId", "--type", "Keyword")
		require.Error(t, err, out)
		require.Contains(t, out, "reserved")

		out = mustRun(t, "operator", "search-attribute", "list", "-n", "orders")
		require.Regexp(t, `CustomerId\s+Keyword`, out)
		require.Regexp(t, `Amount\s+Int`, out)
		require.Regexp(t, `ActivityType\s+Keyword`, out, "system attributes are listed too")
		require.Regexp(t, `StartTime\s+Datetime`, out)
		out = mustRun(t, "operator", "search-attribute", "list", "-n", "default")
		require.NotContains(t, out, "CustomerId", "search attributes are per namespace")

		// An activity started with one is found by it.
		c, err := client.Dial(client.Options{HostPort: cluster.Address(), Namespace: "orders", Logger: quietLogger{}})
		require.NoError(t, err)
		defer c.Close()
		_, err = c.ExecuteActivity(context.Background(), client.StartActivityOptions{
			ID: "sa-1", TaskQueue: "cli-sa", StartToCloseTimeout: time.Minute,
			TypedSearchAttributes: amountAttribute(42),
		}, "charge")
		require.NoError(t, err)
		count, err := c.CountActivities(context.Background(), client.CountActivitiesOptions{Query: "Amount = 42"})
		require.NoError(t, err)
		require.Equal(t, int64(1), count.Count)

		mustRun(t, "operator", "search-attribute", "remove", "-n", "orders", "--name", "CustomerId", "--yes")
		out = mustRun(t, "operator", "search-attribute", "list", "-n", "orders")
		require.NotContains(t, out, "CustomerId")
		require.Contains(t, out, "Amount")
		out, err = temporal("operator", "search-attribute", "remove", "-n", "orders", "--name", "CustomerId", "--yes")
		require.Error(t, err, out)
		require.Contains(t, out, "doesn't exist")
	})

	t.Run("WorkersAndActivities", func(t *testing.T) {
		testTemporalCLIActivities(t, cluster.Address(), mustRun, temporal)
	})
}

// cliAttempt is one attempt of the CLI test's activity, as the activity saw it.
type cliAttempt struct {
	number int32
	cause  string // why its context ended; "" when it began
}

func testTemporalCLIActivities(t *testing.T, address string, mustRun func(*testing.T, ...string) string, run func(...string) (string, error)) {
	const taskQueue = "cli-activities"
	c := dialSDK(t, address)
	attempts := make(chan cliAttempt, 32)
	var stopHeartbeats atomic.Bool
	w := sdkworker.New(c, taskQueue, sdkworker.Options{DisableWorkflowWorker: true})
	w.RegisterActivityWithOptions(func(ctx context.Context) (string, error) {
		n := activity.GetInfo(ctx).Attempt
		attempts <- cliAttempt{number: n}
		for {
			if !stopHeartbeats.Load() {
				activity.RecordHeartbeat(ctx, "progress")
			}
			select {
			case <-ctx.Done():
				attempts <- cliAttempt{number: n, cause: context.Cause(ctx).Error()}
				return "", ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}, activity.RegisterOptions{Name: "long"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	next := func(t *testing.T) cliAttempt {
		t.Helper()
		select {
		case a := <-attempts:
			return a
		case <-ctx.Done():
			t.Fatal("the activity reported no attempt")
		}
		return cliAttempt{}
	}
	runState := func() enumspb.PendingActivityState {
		resp, err := c.WorkflowService().DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{Namespace: "default", ActivityId: "cli-1"})
		if err != nil {
			return enumspb.PENDING_ACTIVITY_STATE_UNSPECIFIED
		}
		return resp.GetInfo().GetRunState()
	}

	handle, err := c.ExecuteActivity(ctx, client.StartActivityOptions{
		ID: "cli-1", TaskQueue: taskQueue, StartToCloseTimeout: 2 * time.Minute, HeartbeatTimeout: time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 10},
	}, "long")
	require.NoError(t, err)
	require.Equal(t, cliAttempt{number: 1}, next(t))

	// The worker shows up once its first worker heartbeat (every second here) arrived.
	require.Eventually(t, func() bool {
		out, err := run("worker", "list", "--query", `TaskQueue = "`+taskQueue+`"`)
		return err == nil && strings.Contains(out, taskQueue)
	}, 60*time.Second, 200*time.Millisecond)

	// Pause: the running attempt learns it from its heartbeat and stops; nothing runs while
	// paused. (pause accepts an empty --workflow-id; unpause, reset and update-options need one,
	// so they name the activity itself.)
	mustRun(t, "activity", "pause", "--activity-id", "cli-1", "--workflow-id", "", "--identity", "ops")
	stopped := next(t)
	require.Contains(t, stopped.cause, "paused")
	require.Eventually(t, func() bool { return runState() == enumspb.PENDING_ACTIVITY_STATE_PAUSED },
		60*time.Second, 20*time.Millisecond)
	out, err := run("activity", "pause", "--activity-id", "cli-1", "--workflow-id", "")
	require.Error(t, err, out)
	require.Contains(t, out, "already paused")

	// Unpause: the next attempt runs.
	mustRun(t, "activity", "unpause", "--activity-id", "cli-1", "--workflow-id", "cli-1")
	require.Equal(t, cliAttempt{number: 2}, next(t))

	// Reset: the running attempt stops, and the activity starts over at attempt 1.
	out = mustRun(t, "activity", "reset", "--activity-id", "cli-1", "--workflow-id", "cli-1", "--reset-heartbeats")
	require.Contains(t, out, "true", out) // resetHeartbeats as the CLI prints it
	stopped = next(t)
	require.Contains(t, stopped.cause, "reset")
	require.Equal(t, cliAttempt{number: 1}, next(t))

	// New options, answered with the options in force.
	out = mustRun(t, "activity", "update-options", "--activity-id", "cli-1", "--workflow-id", "cli-1",
		"--heartbeat-timeout", "30s", "--retry-maximum-attempts", "7")
	require.Regexp(t, `HeartbeatTimeout\s+30s`, out)
	require.Regexp(t, `MaximumAttempts\s+7`, out)
	require.Regexp(t, `TaskQueue\s+`+taskQueue, out)

	// Complete it from the shell: the caller waiting on the handle gets the result.
	stopHeartbeats.Store(true) // its attempt would otherwise learn of the completion and report
	mustRun(t, "activity", "complete", "--activity-id", "cli-1", "--workflow-id", "", "--result", `"from the CLI"`)
	var result string
	require.NoError(t, handle.Get(ctx, &result))
	require.Equal(t, "from the CLI", result)
}

// temporalCLIAt runs the CLI against address and returns its combined output.
func temporalCLIAt(t *testing.T, bin, address string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(args, "--address", address)...).CombinedOutput()
	return string(out), err
}

// cliTaskQueueDescription is `temporal task-queue describe -o json` (enhanced mode).
type cliTaskQueueDescription struct {
	Pollers []struct {
		BuildID        string    `json:"buildId"`
		TaskQueueType  string    `json:"taskQueueType"`
		Identity       string    `json:"identity"`
		LastAccessTime time.Time `json:"lastAccessTime"`
		RatePerSecond  float64   `json:"ratePerSecond"`
	} `json:"pollers"`
	Stats []struct {
		BuildID                 string  `json:"buildId"`
		TaskQueueType           string  `json:"taskQueueType"`
		ApproximateBacklogCount int64   `json:"approximateBacklogCount"`
		ApproximateBacklogAge   string  `json:"approximateBacklogAge"`
		TasksAddRate            float32 `json:"tasksAddRate"`
	} `json:"stats"`
}

// TestTemporalCLITaskQueueDescribe drives `temporal task-queue describe` (enhanced and legacy
// mode) and `temporal task-queue list-partition`: a stock SDK worker polling an activity queue
// is listed with its identity, last poll and rate limit until its graceful shutdown, and
// activities no worker polls for are the backlog of their queue.
func TestTemporalCLITaskQueueDescribe(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	bin := temporalCLI(t)
	cluster := testcluster.New(t, testcluster.Options{})
	run := func(args ...string) (string, error) { return temporalCLIAt(t, bin, cluster.Address(), args...) }
	mustRun := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := run(args...)
		require.NoError(t, err, "temporal %s: %s", strings.Join(args, " "), out)
		return out
	}
	describe := func(t *testing.T, taskQueue string) cliTaskQueueDescription {
		t.Helper()
		out := mustRun(t, "task-queue", "describe", "--task-queue", taskQueue, "--output", "json")
		var d cliTaskQueueDescription
		require.NoError(t, json.Unmarshal([]byte(out), &d), out)
		return d
	}

	const polled, unpolled = "cli-tq-polled", "cli-tq-backlog"
	c, err := client.Dial(client.Options{HostPort: cluster.Address(), Identity: "tq-worker@cli-test", Logger: quietLogger{}})
	require.NoError(t, err)
	defer c.Close()
	w := sdkworker.New(c, polled, sdkworker.Options{DisableWorkflowWorker: true, TaskQueueActivitiesPerSecond: 20})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "noop"})
	require.NoError(t, w.Start())
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()

	t.Run("Pollers", func(t *testing.T) {
		start := time.Now()
		var d cliTaskQueueDescription
		require.Eventually(t, func() bool {
			d = describe(t, polled)
			return len(d.Pollers) > 0
		}, 60*time.Second, 100*time.Millisecond)
		require.Len(t, d.Pollers, 1, "%+v", d)
		p := d.Pollers[0]
		require.Equal(t, "UNVERSIONED", p.BuildID)
		require.Equal(t, "activity", p.TaskQueueType)
		require.Equal(t, "tq-worker@cli-test", p.Identity)
		require.Equal(t, 20.0, p.RatePerSecond, "the worker's TaskQueueActivitiesPerSecond")
		require.WithinRange(t, p.LastAccessTime, start.Add(-time.Second), time.Now().Add(time.Second))
		require.Len(t, d.Stats, 2, "workflow and activity types")

		// The table a user reads.
		out := mustRun(t, "task-queue", "describe", "--task-queue", polled)
		require.Contains(t, out, "Task Queue Statistics:")
		require.Regexp(t, `UNVERSIONED\s+activity\s+tq-worker@cli-test\s+.+\s+20\b`, out)

		out = mustRun(t, "task-queue", "describe", "--task-queue", polled, "--task-queue-type", "activity", "--disable-stats")
		require.NotContains(t, out, "Task Queue Statistics:")
		require.Contains(t, out, "tq-worker@cli-test")

		// Legacy mode asks one type and one partition: the workflow queue by default, which
		// vigil does not serve.
		out = mustRun(t, "task-queue", "describe", "--task-queue", polled, "--legacy-mode", "--task-queue-type-legacy", "activity", "--report-config")
		require.Contains(t, out, "tq-worker@cli-test")
		out = mustRun(t, "task-queue", "describe", "--task-queue", polled, "--legacy-mode")
		require.NotContains(t, out, "tq-worker@cli-test")

		out = mustRun(t, "task-queue", "list-partition", "--task-queue", polled)
		require.Contains(t, out, "Activity Task Queue Partitions")
		require.Regexp(t, polled+`\s+\S+`, out, "the partition and the host that owns it")
	})

	t.Run("Backlog", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, id := range []string{"backlog-1", "backlog-2"} {
			_, err := c.ExecuteActivity(ctx, client.StartActivityOptions{ID: id, TaskQueue: unpolled, StartToCloseTimeout: time.Minute}, "noop")
			require.NoError(t, err)
		}
		var d cliTaskQueueDescription
		require.Eventually(t, func() bool {
			d = describe(t, unpolled)
			for _, s := range d.Stats {
				if s.TaskQueueType == "activity" && s.ApproximateBacklogCount == 2 {
					return true
				}
			}
			return false
		}, 60*time.Second, 100*time.Millisecond, "%+v", d)
		require.Empty(t, d.Pollers)
	})

	t.Run("ShutDownWorkerIsNotListed", func(t *testing.T) {
		w.Stop()
		stopped = true
		d := describe(t, polled)
		require.Empty(t, d.Pollers, "a worker that shut down is removed at once")
	})

	t.Run("Refusals", func(t *testing.T) {
		out, err := run("task-queue", "describe", "--task-queue", polled, "--select-build-id", "v2")
		require.Error(t, err, out)
		require.Contains(t, out, "does not version workers")
		out, err = run("task-queue", "describe", "--task-queue", polled, "--namespace", "missing")
		require.Error(t, err, out)
		require.Contains(t, out, "not found")
	})
}

// TestTemporalCLINamespaceDelete drives `temporal operator namespace delete`: the namespace is
// gone under its name at once, its name can be registered again, and the deleted namespace's
// activities and the namespace itself are removed in the background.
func TestTemporalCLINamespaceDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	bin := temporalCLI(t)
	cluster := testcluster.New(t, testcluster.Options{})
	run := func(args ...string) (string, error) { return temporalCLIAt(t, bin, cluster.Address(), args...) }
	mustRun := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := run(args...)
		require.NoError(t, err, "temporal %s: %s", strings.Join(args, " "), out)
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	mustRun(t, "operator", "namespace", "create", "-n", "doomed")
	c, err := client.Dial(client.Options{HostPort: cluster.Address(), Namespace: "doomed", Logger: quietLogger{}})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.ExecuteActivity(ctx, client.StartActivityOptions{ID: "left-behind", TaskQueue: "nobody-polls", StartToCloseTimeout: time.Minute}, "noop")
	require.NoError(t, err)
	desc, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "doomed"})
	require.NoError(t, err)
	deletedName := "doomed-deleted-" + desc.GetNamespaceInfo().GetId()[:5]

	// The CLI asks for the name to be typed; without it nothing happens.
	out, err := run("operator", "namespace", "delete", "-n", "doomed")
	require.Error(t, err, out)
	mustRun(t, "operator", "namespace", "describe", "-n", "doomed")

	out = mustRun(t, "operator", "namespace", "delete", "-n", "doomed", "--yes")
	require.Contains(t, out, "Namespace doomed has been deleted")
	out, err = run("operator", "namespace", "describe", "-n", "doomed")
	require.Error(t, err, out)
	require.Contains(t, out, "not found")
	require.NotContains(t, mustRun(t, "operator", "namespace", "list"), "doomed")
	describeLeftBehind := func() error {
		_, err := c.WorkflowService().DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{
			Namespace: "doomed", ActivityId: "left-behind"})
		return err
	}
	var nsNotFound *serviceerror.NamespaceNotFound
	require.ErrorAs(t, describeLeftBehind(), &nsNotFound, "the deleted namespace serves no call")

	// Deleted in the background: its activity, then the namespace itself.
	require.Eventually(t, func() bool {
		_, err := run("operator", "namespace", "describe", "-n", deletedName)
		return err != nil
	}, 90*time.Second, 200*time.Millisecond, "the deleted namespace is removed once its data is")

	// The name is free, and the new namespace (with the same derived ID, the old one being
	// gone) holds nothing of the old one.
	mustRun(t, "operator", "namespace", "create", "-n", "doomed")
	again, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "doomed"})
	require.NoError(t, err)
	require.Equal(t, desc.GetNamespaceInfo().GetId(), again.GetNamespaceInfo().GetId())
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, describeLeftBehind(), &notFound, "the old namespace's activity was deleted")

	// The default namespace stays.
	out, err = run("operator", "namespace", "delete", "-n", "default", "--yes")
	require.Error(t, err, out)
	require.Contains(t, out, "server configuration")
}
