package tests

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/fx"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	activitylib "github.com/vigilhq/vigil/chasm/activity"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/tests/freeport"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// Leases of SDK workers heartbeating every second: 3 s once the interval is known, and 3 s
// for the first heartbeat too.
var shortLeases = map[dynamicconfig.Key]any{
	dynamicconfig.DefaultLeaseDuration.Key(): "3s",
}

func startActivity(t *testing.T, c client.Client, id, taskQueue string, hold time.Duration) client.ActivityHandle {
	t.Helper()
	handle, err := c.ExecuteActivity(context.Background(), client.StartActivityOptions{
		ID: id, TaskQueue: taskQueue, StartToCloseTimeout: 10 * time.Minute,
	}, "work", hold)
	require.NoError(t, err)
	return handle
}

func result(t *testing.T, handle client.ActivityHandle) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out string
	require.NoError(t, handle.Get(ctx, &out))
	return out
}

func TestActivityRunsAndReturnsItsResult(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{})
	events := eventsFile(t)
	startActivityWorker(t, cluster.Address(), "q", "B", events, "0s")
	c := dialSDK(t, cluster.Address())
	require.Equal(t, "done by B", result(t, startActivity(t, c, "a-1", "q", 0)))
}

// The headline: an activity with StartToClose 10 minutes whose worker is SIGKILLed runs again
// on another worker seconds later, not 10 minutes later.
func TestActivityOfSIGKILLedWorkerRunsOnAnotherWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{DynamicConfig: shortLeases})
	explainOnFailure(t, cluster.Address(), "a-1")
	events := eventsFile(t)
	a := startActivityWorker(t, cluster.Address(), "q", "A", events, "")
	c := dialSDK(t, cluster.Address())
	handle := startActivity(t, c, "a-1", "q", time.Hour)
	waitForEvent(t, events, "A started a-1")
	startActivityWorker(t, cluster.Address(), "q", "B", events, "0s")
	time.Sleep(1500 * time.Millisecond) // A heartbeats a few times: its lease adapts to 3 s

	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	// Usually after the kill. On a starved machine A may have missed its lease before the kill,
	// and B may then have started (and finished) a-1 before it: either way B runs it, long
	// before StartToClose.
	bStarted := waitForEvent(t, events, "B started a-1")
	t.Logf("the activity restarted on B %v after A was killed (StartToClose 10m)", bStarted.at.Sub(killed).Round(time.Millisecond))
	require.Less(t, bStarted.at.Sub(killed), time.Minute, "far below StartToClose")
	require.Equal(t, "done by B", result(t, handle))

	// A's liveness record says what its death moved, and where it went.
	liveness := dialLiveness(t, cluster.Address())
	workers, err := liveness.ListWorkerLiveness(context.Background(), &livenesspb.ListWorkerLivenessRequest{Namespace: "default"})
	require.NoError(t, err)
	var keyOfA string
	for _, w := range workers.GetWorkers() {
		if w.GetLastHeartbeat().GetWorkerIdentity() == "A" {
			keyOfA = w.GetWorkerInstanceKey()
		}
	}
	require.NotEmpty(t, keyOfA)
	described, err := liveness.DescribeWorkerLiveness(context.Background(), &livenesspb.DescribeWorkerLivenessRequest{
		Namespace: "default", WorkerInstanceKey: keyOfA, IncludeMovedActivities: true,
	})
	require.NoError(t, err)
	require.Len(t, described.GetMovedActivities(), 1)
	moved := described.GetMovedActivities()[0]
	require.Equal(t, "a-1", moved.GetActivityId())
	require.Equal(t, "worker_inactive", moved.GetReason())
	require.Equal(t, "Completed", moved.GetStatus(), "B completed it")
	require.GreaterOrEqual(t, moved.GetAttempt(), int32(2))
}

// A worker that is only paused (a partition, a GC pause, SIGSTOP) past its lease loses the
// activity to a live worker, and its late completion is refused.
func TestLateCompletionOfPausedWorkerIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{DynamicConfig: shortLeases})
	explainOnFailure(t, cluster.Address(), "a-1")
	events := eventsFile(t)
	a := startActivityWorker(t, cluster.Address(), "q", "A", events, "")
	c := dialSDK(t, cluster.Address())
	handle := startActivity(t, c, "a-1", "q", 8*time.Second)
	waitForEvent(t, events, "A started a-1")
	startActivityWorker(t, cluster.Address(), "q", "B", events, "0s")
	time.Sleep(1500 * time.Millisecond)

	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	waitForEvent(t, events, "B started a-1")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	require.Equal(t, "done by B", result(t, handle))

	// A wakes up. Its copy either finishes or is cancelled by the CancelActivity command the
	// server queued for it when it took the attempt away; either way A reports on a stale
	// attempt, and the server refuses it.
	require.Eventually(t, func() bool {
		return hasEvent(events, "A finished a-1") || hasEvent(events, "A cancelled a-1")
	}, time.Minute, 20*time.Millisecond, "A never resumed its copy of the activity")
	require.Eventually(t, func() bool {
		return metricAtLeast(t, cluster, activitylib.ActivityStaleResponsesRefused.ExportedName(), 1)
	}, 30*time.Second, 100*time.Millisecond, "A's late completion was refused")
	require.Equal(t, "done by B", result(t, handle), "the caller still sees B's result")
}

func metricAtLeast(t *testing.T, cluster *testcluster.Cluster, name string, min float64) bool {
	t.Helper()
	v, ok := scrapeMetric(t, cluster.HTTPAddress(), name)
	return ok && v >= min
}

func TestActivityCancelReachesTheWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{})
	events := eventsFile(t)
	startActivityWorker(t, cluster.Address(), "q", "A", events, "")
	c := dialSDK(t, cluster.Address())
	handle := startActivity(t, c, "a-1", "q", time.Hour)
	waitForEvent(t, events, "A started a-1")

	require.NoError(t, handle.Cancel(context.Background(), client.CancelActivityOptions{Reason: "not needed"}))
	// The activity does not heartbeat, so only the worker-command path can reach it.
	waitForEvent(t, events, "A cancelled a-1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out string
	err := handle.Get(ctx, &out)
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled), "got %v", err)
}

// TestServerProcess is not a test: it is a vigil server the crash test runs and SIGKILLs.
func TestServerProcess(t *testing.T) {
	dir := os.Getenv("VIGIL_TEST_SERVER_DIR")
	if dir == "" {
		t.Skip("runs only as a subprocess of a functional test")
	}
	var cfg server.Config
	cfg.Frontend.Address = os.Getenv("VIGIL_TEST_SERVER_ADDRESS")
	cfg.Frontend.HTTPAddress = "127.0.0.1:0"
	cfg.History.NumShards = 4
	cfg.Persistence.SQLite.Path = filepath.Join(dir, "vigil.db")
	cfg.DynamicConfigValues = []string{`worker.defaultLeaseDuration="3s"`}
	var opts []server.Option
	if v := os.Getenv("VIGIL_TEST_SERVER_START_DELAY"); v != "" {
		// Recovery work (shards, re-queued attempts, timers) that takes this long, as on a
		// loaded host: started after everything else but before the frontend opens.
		delay, err := time.ParseDuration(v)
		require.NoError(t, err)
		opts = append(opts, server.WithFxOptions(fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.StartHook(func() { time.Sleep(delay) }))
		})))
	}
	srv, err := server.New(cfg, opts...)
	require.NoError(t, err)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	require.NoError(t, srv.Start(ctx))
	fmt.Println("server started")
	<-ctx.Done()
}

func TestServerSIGKILLLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	dir := t.TempDir()
	address := freeAddress(t)
	startServer := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestServerProcess$", "-test.v=false")
		cmd.Env = append(os.Environ(), "VIGIL_TEST_SERVER_DIR="+dir, "VIGIL_TEST_SERVER_ADDRESS="+address)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		require.Eventually(t, func() bool {
			conn, err := net.Dial("tcp", address)
			if err == nil {
				_ = conn.Close()
			}
			return err == nil
		}, 60*time.Second, 20*time.Millisecond, "server did not start")
		return cmd
	}
	srv := startServer()
	events := eventsFile(t)
	startActivityWorker(t, address, "q", "A", events, "")
	c := dialSDK(t, address)
	handle := startActivity(t, c, "a-1", "q", 6*time.Second)
	waitForEvent(t, events, "A started a-1")

	require.NoError(t, srv.Process.Signal(syscall.SIGKILL))
	_ = srv.Wait()
	startServer()

	// A finishes its attempt and reports to the restarted server (the SDK retries while it is
	// down); the restart's lease grace keeps A's attempt from being taken away meanwhile.
	require.Equal(t, "done by A", result(t, handle))
}

// freeAddress is an address for a server process the test starts (freeport.Address).
func freeAddress(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Address()
	require.NoError(t, err)
	return addr
}

// With a 10-minute lease, only the shutdown itself can move the activity to B in time.
func TestGracefulStopReschedulesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{DynamicConfig: map[dynamicconfig.Key]any{
		dynamicconfig.DefaultLeaseDuration.Key():    "10m",
		dynamicconfig.LeaseIntervalMultiplier.Key(): 600,
	}})
	explainOnFailure(t, cluster.Address(), "a-1")
	events := eventsFile(t)
	ca, err := client.Dial(client.Options{HostPort: cluster.Address(), Identity: "A", WorkerHeartbeatInterval: time.Second, Logger: quietLogger{}})
	require.NoError(t, err)
	defer ca.Close()
	a := sdkworker.New(ca, "q", sdkworker.Options{})
	a.RegisterActivityWithOptions(workActivity("A", events, nil), activity.RegisterOptions{Name: "work"})
	require.NoError(t, a.Start())

	c := dialSDK(t, cluster.Address())
	handle := startActivity(t, c, "a-1", "q", time.Hour)
	waitForEvent(t, events, "A started a-1")
	startActivityWorker(t, cluster.Address(), "q", "B", events, "0s")

	stopped := time.Now()
	a.Stop()
	bStarted := waitForEventAfter(t, events, "B started a-1", stopped)
	t.Logf("B took over %v after A's graceful stop (A's lease: 10m)", bStarted.at.Sub(stopped).Round(time.Millisecond))
	require.Equal(t, "done by B", result(t, handle))
}
