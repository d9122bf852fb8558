package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/chasm/worker"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// Connection suspicion (docs/concepts.md, "Connection suspicion"). Workers here heartbeat every 30 s,
// so their lease is 90 s: only the connection signal can explain a recovery within the test.

const (
	envSuspicionAddress  = "VIGIL_TEST_SUSPICION_ADDRESS"
	envSuspicionQueue    = "VIGIL_TEST_SUSPICION_QUEUE"
	envSuspicionName     = "VIGIL_TEST_SUSPICION_NAME"
	envSuspicionEvents   = "VIGIL_TEST_SUSPICION_EVENTS"
	envSuspicionInterval = "VIGIL_TEST_SUSPICION_INTERVAL"

	slowHeartbeat = 30 * time.Second
)

// TestSuspicionWorkerProcess is not a test: it is a stock SDK worker process (workActivity, a
// heartbeat interval from its environment) that the suspicion tests kill. It prints its
// worker's instance key.
func TestSuspicionWorkerProcess(t *testing.T) {
	address := os.Getenv(envSuspicionAddress)
	if address == "" {
		t.Skip("runs only as a subprocess of a functional test")
	}
	interval, err := time.ParseDuration(os.Getenv(envSuspicionInterval))
	require.NoError(t, err)
	name := os.Getenv(envSuspicionName)
	c, err := client.Dial(client.Options{HostPort: address, Identity: name, WorkerHeartbeatInterval: interval, Logger: quietLogger{}})
	require.NoError(t, err)
	w := sdkworker.New(c, os.Getenv(envSuspicionQueue), sdkworker.Options{})
	w.RegisterActivityWithOptions(workActivity(name, os.Getenv(envSuspicionEvents), nil), activity.RegisterOptions{Name: "work"})
	require.NoError(t, w.Start())
	fmt.Println("worker started")
	select {}
}

// startSuspicionWorker runs TestSuspicionWorkerProcess as name.
func startSuspicionWorker(t *testing.T, address, taskQueue, name, events string, interval time.Duration) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuspicionWorkerProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(),
		envSuspicionAddress+"="+address, envSuspicionQueue+"="+taskQueue, envSuspicionName+"="+name,
		envSuspicionEvents+"="+events, envSuspicionInterval+"="+interval.String())
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	started := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if strings.Contains(scanner.Text(), "worker started") {
				close(started)
				for scanner.Scan() {
				}
				return
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatalf("worker %s did not start", name)
	}
	return cmd
}

// inProcessWorker runs workActivity as name in this process, on its own client. Workers named
// B finish every activity at once (they take over).
func inProcessWorker(t *testing.T, address, taskQueue, name, events string) (client.Client, sdkworker.Worker) {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: address, Identity: name, WorkerHeartbeatInterval: slowHeartbeat, Logger: quietLogger{}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
	var hold *time.Duration
	if name == "B" {
		hold = new(time.Duration)
	}
	w.RegisterActivityWithOptions(workActivity(name, events, hold), activity.RegisterOptions{Name: "work"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return c, w
}

// workerByIdentity finds a worker's liveness record by the identity its SDK reports.
func workerByIdentity(t *testing.T, lc livenesspb.WorkerLivenessServiceClient, identity string) *livenesspb.WorkerLiveness {
	t.Helper()
	var found *livenesspb.WorkerLiveness
	require.Eventually(t, func() bool {
		resp, err := lc.ListWorkerLiveness(context.Background(), &livenesspb.ListWorkerLivenessRequest{Namespace: "default"})
		if err != nil {
			return false
		}
		for _, w := range resp.GetWorkers() {
			if w.GetLastHeartbeat().GetWorkerIdentity() == identity {
				found = w
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "no worker %q", identity)
	return found
}

func describeWorker(t *testing.T, lc livenesspb.WorkerLivenessServiceClient, key string) *livenesspb.WorkerLiveness {
	t.Helper()
	resp, err := lc.DescribeWorkerLiveness(context.Background(), &livenesspb.DescribeWorkerLivenessRequest{Namespace: "default", WorkerInstanceKey: key})
	require.NoError(t, err)
	return resp.GetWorker()
}

func suspicionCluster(t *testing.T, grace string, configure func(*testcluster.Options)) *testcluster.Cluster {
	t.Helper()
	opts := testcluster.Options{DynamicConfig: map[dynamicconfig.Key]any{worker.SuspectGracePeriod.Key(): grace}}
	if configure != nil {
		configure(&opts)
	}
	return testcluster.New(t, opts)
}

// A SIGKILLed worker's activity runs on another worker long before its 90 s lease could run
// out, and the dead worker is INACTIVE because its connection was lost.
func TestSIGKILLedWorkerIsKnownDeadByItsConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := suspicionCluster(t, worker.SuspectGracePeriodDefault.String(), nil)
	explainOnFailure(t, cluster.Address(), "a-1")
	lc := dialLiveness(t, cluster.Address())
	events := eventsFile(t)
	a := startSuspicionWorker(t, cluster.Address(), "q", "A", events, slowHeartbeat)
	c := dialSDK(t, cluster.Address())
	handle := startActivity(t, c, "a-1", "q", time.Hour)
	waitForEvent(t, events, "A started a-1")
	aKey := workerByIdentity(t, lc, "A").GetWorkerInstanceKey()
	inProcessWorker(t, cluster.Address(), "q", "B", events)

	require.NoError(t, a.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	bStarted := waitForEventAfter(t, events, "B started a-1", killed)
	t.Logf("the activity restarted on B %v after A was killed (heartbeat every %v, lease %v)",
		bStarted.at.Sub(killed).Round(time.Millisecond), slowHeartbeat, 3*slowHeartbeat)
	dead := describeWorker(t, lc, aKey)
	require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_INACTIVE, dead.GetState())
	require.Equal(t, livenesspb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST, dead.GetInactiveReason())
	require.Equal(t, "done by B", result(t, handle))
	require.Eventually(t, func() bool { return metricAtLeast(t, cluster, metrics.WorkerSuspicions.ExportedName(), 2) },
		30*time.Second, 100*time.Millisecond, "worker_suspicions counts A's raised and confirmed")
}

// A worker whose connections are cut while its process lives reconnects, polls, and keeps its
// activity: it is never declared dead and its activity is never rescheduled to B.
func TestLiveWorkerKeepsItsWorkWhenItsConnectionIsCut(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	for _, tc := range []struct {
		name string
		cut  func(t *testing.T, p *tcpProxy)
		opts func(*testcluster.Options)
	}{
		{name: "ResetByAProxy", cut: func(_ *testing.T, p *tcpProxy) { p.Reset() }},
		{name: "PausedShorterThanTheGrace", cut: func(_ *testing.T, p *tcpProxy) {
			p.Pause()
			time.Sleep(500 * time.Millisecond) // the network outage itself
			p.Resume()
		}},
		{name: "ServerGOAWAY", cut: func(*testing.T, *tcpProxy) {}, opts: func(o *testcluster.Options) {
			o.Configure = func(cfg *testcluster.ServerConfig) {
				cfg.Frontend.MaxConnectionAge = 2 * time.Second
				cfg.Frontend.MaxConnectionAgeGrace = 500 * time.Millisecond
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cluster := suspicionCluster(t, worker.SuspectGracePeriodDefault.String(), tc.opts)
			lc := dialLiveness(t, cluster.Address())
			proxy := startProxy(t, cluster.Address())
			events := eventsFile(t)
			c := dialSDK(t, cluster.Address())
			inProcessWorker(t, proxy.Address(), "q", "A", events)
			aKey := workerByIdentity(t, lc, "A").GetWorkerInstanceKey()
			handle := startActivity(t, c, "a-1", "q", 8*time.Second)
			waitForEvent(t, events, "A started a-1")
			inProcessWorker(t, cluster.Address(), "q", "B", events)

			for range 3 {
				tc.cut(t, proxy)
				time.Sleep(time.Second)
			}
			require.Equal(t, "done by A", result(t, handle))
			require.False(t, hasEvent(events, "B started a-1"), "A's activity was rescheduled")
			alive := describeWorker(t, lc, aKey)
			require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_ACTIVE, alive.GetState())
			require.Zero(t, alive.GetResurrectionCount(), "A was never declared dead")
		})
	}
}

// A worker stopped gracefully says goodbye: SHUTDOWN, not CONNECTION_LOST, though its
// connection closes right after.
func TestGracefulStopIsShutdownNotConnectionLost(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := suspicionCluster(t, "500ms", nil)
	lc := dialLiveness(t, cluster.Address())
	events := eventsFile(t)
	c, w := inProcessWorker(t, cluster.Address(), "q", "A", events)
	aKey := workerByIdentity(t, lc, "A").GetWorkerInstanceKey()
	w.Stop()
	c.Close()
	require.Eventually(t, func() bool {
		return describeWorker(t, lc, aKey).GetState() == livenesspb.LivenessState_LIVENESS_STATE_INACTIVE
	}, time.Minute, 20*time.Millisecond)
	time.Sleep(time.Second) // past the grace: nothing changes the reason
	require.Equal(t, livenesspb.InactiveReason_INACTIVE_REASON_SHUTDOWN, describeWorker(t, lc, aKey).GetInactiveReason())
}

// A server restart while a dead worker is suspect gives the outcome the server would have
// reached without it: the dead worker CONNECTION_LOST and its activity on B, B untouched.
func TestRestartWhileSuspectKeepsTheOutcome(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	address := freeAddress(t)
	path := t.TempDir() + "/vigil.db"
	opts := func(o *testcluster.Options) {
		o.Path = path
		o.DynamicConfig[dynamicconfig.LeaseExpiryGraceAfterRestart.Key()] = "2s"
		o.Configure = func(cfg *testcluster.ServerConfig) { cfg.Frontend.Address = address }
	}
	// A grace long enough to see the suspicion and restart the server within it.
	cluster := suspicionCluster(t, "20s", opts)
	explainOnFailure(t, cluster.Address(), "a-1")
	lc := dialLiveness(t, cluster.Address())
	events := eventsFile(t)
	a := startSuspicionWorker(t, address, "q", "A", events, slowHeartbeat)
	c := dialSDK(t, address)
	handle := startActivity(t, c, "a-1", "q", time.Hour)
	waitForEvent(t, events, "A started a-1")
	aKey := workerByIdentity(t, lc, "A").GetWorkerInstanceKey()
	inProcessWorker(t, address, "q", "B", events)
	bKey := workerByIdentity(t, lc, "B").GetWorkerInstanceKey()

	require.NoError(t, a.Process.Signal(syscall.SIGKILL))
	require.Eventually(t, func() bool { return describeWorker(t, lc, aKey).GetSuspectSince() != nil },
		time.Minute, 20*time.Millisecond, "A became suspect")
	require.Equal(t, "connection closed", describeWorker(t, lc, aKey).GetSuspectReason())
	cluster.Crash()
	cluster = suspicionCluster(t, "20s", opts)
	lc = dialLiveness(t, cluster.Address())

	waitForEvent(t, events, "B started a-1")
	dead := describeWorker(t, lc, aKey)
	require.Equal(t, livenesspb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST, dead.GetInactiveReason())
	require.Equal(t, "done by B", result(t, handle))
	alive := describeWorker(t, lc, bKey)
	require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_ACTIVE, alive.GetState())
	require.Nil(t, alive.GetSuspectSince(), "B reconnected after the restart: never suspect, or cleared")
}

// TestMeasureSDKReconnect is a measurement, not a test: how long the stock SDK takes to open
// a new connection after its connection is reset. Run with VIGIL_MEASURE_RECONNECT=1 -v.
func TestMeasureSDKReconnect(t *testing.T) {
	if os.Getenv("VIGIL_MEASURE_RECONNECT") == "" {
		t.Skip("measurement; set VIGIL_MEASURE_RECONNECT=1")
	}
	cluster := suspicionCluster(t, "5s", nil)
	proxy := startProxy(t, cluster.Address())
	inProcessWorker(t, proxy.Address(), "q", "A", eventsFile(t))
	time.Sleep(2 * time.Second)
	var gaps []time.Duration
	for range 30 {
		reset := time.Now()
		proxy.Reset()
		require.Eventually(t, func() bool { return len(proxy.AcceptsSince(reset)) > 0 }, time.Minute, time.Millisecond)
		gaps = append(gaps, proxy.AcceptsSince(reset)[0].Sub(reset))
		time.Sleep(time.Duration(200+len(gaps)*37%500) * time.Millisecond)
	}
	slices.Sort(gaps)
	t.Logf("SDK reconnect after a reset over %d resets: min %v p50 %v p90 %v max %v", len(gaps),
		gaps[0], gaps[len(gaps)/2], gaps[len(gaps)*9/10], gaps[len(gaps)-1])
}

// TestMeasureKillToRerun is a measurement, not a test: kill → next attempt started on another
// worker, over VIGIL_MEASURE_KILLS SIGKILLed worker processes (default 20) per heartbeat
// interval. Run with VIGIL_MEASURE_KILLS=N -v.
func TestMeasureKillToRerun(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VIGIL_MEASURE_KILLS"))
	if n <= 0 {
		t.Skip("measurement; set VIGIL_MEASURE_KILLS=N")
	}
	for _, interval := range []time.Duration{time.Second, time.Minute} {
		// Killing 20 workers of a small fleet within 30 s is what the expiry brake's share rule
		// is for (more than 55 % of the namespace): it would hold the expiries. Off here, to
		// measure detection; TestSuspicionAndTheExpiryBrake covers the brake.
		cluster := suspicionCluster(t, worker.SuspectGracePeriodDefault.String(), func(o *testcluster.Options) {
			o.DynamicConfig[dynamicconfig.ExpiryBrakeThreshold.Key()] = 1.0
		})
		lc := dialLiveness(t, cluster.Address())
		events := eventsFile(t)
		c := dialSDK(t, cluster.Address())
		inProcessWorker(t, cluster.Address(), "q", "B", events)
		var gaps []time.Duration
		reasons := map[livenesspb.InactiveReason]int{}
		for i := range n {
			name := fmt.Sprintf("A%d", i)
			a := startSuspicionWorker(t, cluster.Address(), "q-"+name, name, events, interval)
			id := fmt.Sprintf("a-%v-%d", interval, i)
			startActivity(t, c, id, "q-"+name, time.Hour)
			waitForEvent(t, events, name+" started "+id)
			key := workerByIdentity(t, lc, name).GetWorkerInstanceKey()
			// B takes over: the activity's queue gets a B poller only now, so that A got it.
			inProcessWorker(t, cluster.Address(), "q-"+name, "B", events)
			require.NoError(t, a.Process.Signal(syscall.SIGKILL))
			killed := time.Now()
			started := waitForEventAfter(t, events, "B started "+id, killed)
			gaps = append(gaps, started.at.Sub(killed))
			reasons[describeWorker(t, lc, key).GetInactiveReason()]++
			_ = a.Wait()
		}
		slices.Sort(gaps)
		t.Logf("interval %v: kill → next attempt started on B over %d kills: p50 %v p90 %v p99 %v max %v; reasons %v",
			interval, n, gaps[n/2].Round(time.Millisecond), gaps[n*9/10].Round(time.Millisecond),
			gaps[min(n-1, n*99/100)].Round(time.Millisecond), gaps[n-1].Round(time.Millisecond), reasons)
		cluster.Stop()
	}
}

// TestMeasureFalsePositives is a measurement, not a test: VIGIL_MEASURE_RESETS connection
// resets (default none) spread over 10 live workers running long activities, then how many were
// ever declared dead and how many of their activities moved. Run with -v.
func TestMeasureFalsePositives(t *testing.T) {
	resets, _ := strconv.Atoi(os.Getenv("VIGIL_MEASURE_RESETS"))
	if resets <= 0 {
		t.Skip("measurement; set VIGIL_MEASURE_RESETS=N")
	}
	// A first SDK heartbeat gets worker.defaultLeaseDuration (30 s), as long as the 30 s
	// interval: resets that delay the second heartbeat would end that lease, which is not what
	// is measured here.
	cluster := suspicionCluster(t, worker.SuspectGracePeriodDefault.String(), func(o *testcluster.Options) {
		o.DynamicConfig[dynamicconfig.DefaultLeaseDuration.Key()] = "90s"
	})
	explainOnFailure(t, cluster.Address(), "a-1")
	lc := dialLiveness(t, cluster.Address())
	events := eventsFile(t)
	c := dialSDK(t, cluster.Address())
	const workers = 10
	var proxies []*tcpProxy
	var keys []string
	for i := range workers {
		p := startProxy(t, cluster.Address())
		proxies = append(proxies, p)
		name := fmt.Sprintf("L%d", i)
		inProcessWorker(t, p.Address(), "q-"+name, name, events)
		keys = append(keys, workerByIdentity(t, lc, name).GetWorkerInstanceKey())
		startActivity(t, c, "long-"+name, "q-"+name, time.Hour)
		waitForEvent(t, events, name+" started long-"+name)
		inProcessWorker(t, cluster.Address(), "q-"+name, "B", events) // would take it if it moved
	}
	start := time.Now()
	for i := range resets {
		proxies[i%workers].Reset()
		// Each worker's connection is cut about every 10×this: a worker is cut again while it
		// is still backing off from the last time, the SDK's worst case.
		time.Sleep(time.Duration(50+i*7%100) * time.Millisecond)
	}
	time.Sleep(20 * time.Second) // every grace, however grown, has run out
	inactive := 0
	for _, key := range keys {
		w := describeWorker(t, lc, key)
		if w.GetState() != livenesspb.LivenessState_LIVENESS_STATE_ACTIVE || w.GetResurrectionCount() > 0 {
			inactive++
		}
	}
	moved := 0
	for i := range workers {
		if hasEvent(events, fmt.Sprintf("B started long-L%d", i)) {
			moved++
		}
	}
	raised, _ := scrapeMetric(t, cluster.HTTPAddress(), metrics.WorkerSuspicions.ExportedName()+`{outcome="raised"}`)
	confirmed, _ := scrapeMetric(t, cluster.HTTPAddress(), metrics.WorkerSuspicions.ExportedName()+`{outcome="confirmed"}`)
	t.Logf("%d resets of %d live workers over %v: %d suspicions raised, %d confirmed, %d workers ever declared dead, %d activities moved",
		resets, workers, time.Since(start).Round(time.Second), int(raised), int(confirmed), inactive, moved)
}

// A worker whose machine stops answering (its network gone, nothing closed) is noticed by the
// server's keepalive pings, and its activity runs on B long before its 90 s lease runs out.
func TestSilentPeerIsNoticedByKeepalive(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := suspicionCluster(t, worker.SuspectGracePeriodDefault.String(), nil)
	explainOnFailure(t, cluster.Address(), "a-1")
	lc := dialLiveness(t, cluster.Address())
	proxy := startProxy(t, cluster.Address())
	events := eventsFile(t)
	c := dialSDK(t, cluster.Address())
	inProcessWorker(t, proxy.Address(), "q", "A", events)
	aKey := workerByIdentity(t, lc, "A").GetWorkerInstanceKey()
	handle := startActivity(t, c, "a-1", "q", time.Hour)
	waitForEvent(t, events, "A started a-1")
	inProcessWorker(t, cluster.Address(), "q", "B", events)

	proxy.Pause() // A's traffic is held both ways: to the server A is silent, not gone
	t.Cleanup(proxy.Resume)
	paused := time.Now()
	bStarted := waitForEventAfter(t, events, "B started a-1", paused)
	t.Logf("the activity restarted on B %v after A's network went silent", bStarted.at.Sub(paused).Round(time.Millisecond))
	require.Equal(t, "done by B", result(t, handle))
	require.Equal(t, livenesspb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST, describeWorker(t, lc, aKey).GetInactiveReason())
}

// Cluster: a worker whose connection to host 1 is cut reconnects to host 2 (a load balancer
// moved it). Host 1 reports it lost, host 2 reports it seen, both to the shard's owner
// wherever that is: the worker keeps its activity.
func TestClusterWorkerReconnectingToAnotherHostIsCleared(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	hosts := testcluster.NewHosts(t, 2, testcluster.Options{NumShards: 4, DynamicConfig: map[dynamicconfig.Key]any{
		worker.SuspectGracePeriod.Key(): worker.SuspectGracePeriodDefault.String(),
	}})
	lc := dialLiveness(t, hosts[0].Address())
	proxy := startProxy(t, hosts[0].Address())
	events := eventsFile(t)
	c := dialSDK(t, hosts[0].Address())
	inProcessWorker(t, proxy.Address(), "q", "A", events)
	aKey := workerByIdentity(t, lc, "A").GetWorkerInstanceKey()
	handle := startActivity(t, c, "a-1", "q", 8*time.Second)
	waitForEvent(t, events, "A started a-1")
	inProcessWorker(t, hosts[1].Address(), "q", "B", events)

	proxy.SetTarget(hosts[1].Address())
	proxy.Reset()
	require.Eventually(t, func() bool {
		cleared := 0.0
		for _, h := range hosts {
			v, _ := scrapeMetric(t, h.HTTPAddress(), metrics.WorkerSuspicions.ExportedName()+`{outcome="cleared"}`)
			cleared += v
		}
		return cleared >= 1
	}, time.Minute, 50*time.Millisecond, "A was suspected (host 1) and cleared (host 2)")
	require.Equal(t, "done by A", result(t, handle))
	require.False(t, hasEvent(events, "B started a-1"), "A's activity was rescheduled")
	alive := describeWorker(t, lc, aKey)
	require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_ACTIVE, alive.GetState())
	require.Zero(t, alive.GetResurrectionCount())
}
