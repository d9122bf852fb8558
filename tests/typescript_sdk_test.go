package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// The TypeScript SDK test drives a stock TypeScript SDK worker and client (tests/testdata/typescript;
// their native part is Temporal's Rust sdk-core, shared with the Python, .NET and Ruby SDKs)
// against an in-process server. It needs Node.js and the packages of package-lock.json: `npm
// ci` in tests/testdata/typescript, which .ci/run does and this test does when node_modules is
// missing. Without node the test is skipped, except under CI=true, where it fails.

const tsSDKVersion = "1.24.0"

// typescriptSDK returns the node binary and the folder of the scripts, with their packages.
func typescriptSDK(t *testing.T) (node, dir string) {
	t.Helper()
	fail := t.Skip
	if os.Getenv("CI") == "true" {
		fail = t.Fatal
	}
	node, err := exec.LookPath("node")
	if err != nil {
		fail("no node on PATH: install Node.js to run the TypeScript SDK test")
	}
	dir, err = filepath.Abs(filepath.Join("testdata", "typescript"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@temporalio", "worker", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			fail("no npm on PATH to install the TypeScript SDK (npm ci in tests/testdata/typescript)")
		}
		// Once for every test of the package: two npm ci in one folder at once undo each other.
		tsInstall.Do(func() {
			tsInstall.out, tsInstall.err = exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefix", dir).CombinedOutput()
		})
		require.NoError(t, tsInstall.err, "npm ci in %s: %s", dir, tsInstall.out)
	}
	return node, dir
}

// tsInstall is the one npm ci of the package's TypeScript tests, when node_modules is missing.
var tsInstall struct {
	sync.Once
	out []byte
	err error
}

// tsEvent is one line a script printed.
type tsEvent struct {
	Event   string         `json:"event"`
	ID      string         `json:"id"`
	Attempt int            `json:"attempt"`
	Worker  string         `json:"worker"`
	Level   string         `json:"level"`
	Message string         `json:"message"`
	Meta    map[string]any `json:"meta"`
}

// sdkProcess is a worker process that prints JSON lines: a TypeScript worker, or a Go one
// (TestSDKWorkerProcess).
type sdkProcess struct {
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every event
	events  []tsEvent
	exited  bool
}

func startSDKProcess(t *testing.T, name string, cmd *exec.Cmd) *sdkProcess {
	t.Helper()
	p := &sdkProcess{name: name, cmd: cmd, changed: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		scanner := bufio.NewScanner(stdout)
		scanner.Buffer(make([]byte, 64*1024), 1<<20)
		for scanner.Scan() {
			var ev tsEvent
			if json.Unmarshal(scanner.Bytes(), &ev) != nil {
				continue
			}
			p.record(func() { p.events = append(p.events, ev) })
		}
		p.record(func() { p.exited = true })
	}()
	p.waitFor(t, "ready", func(ev tsEvent) bool { return ev.Event == "ready" })
	return p
}

func (p *sdkProcess) record(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitFor waits until the process printed an event that match accepts, and returns it.
func (p *sdkProcess) waitFor(t *testing.T, what string, match func(tsEvent) bool) tsEvent {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		p.mu.Lock()
		for _, ev := range p.events {
			if match(ev) {
				p.mu.Unlock()
				return ev
			}
		}
		exited, changed := p.exited, p.changed
		p.mu.Unlock()
		if exited {
			t.Fatalf("worker %s exited before %s; it printed %+v", p.name, what, p.snapshot())
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("worker %s: no %s; it printed %+v", p.name, what, p.snapshot())
		}
	}
}

func (p *sdkProcess) started(t *testing.T, activityID string) tsEvent {
	t.Helper()
	return p.waitFor(t, "start of "+activityID, func(ev tsEvent) bool { return ev.Event == "started" && ev.ID == activityID })
}

func (p *sdkProcess) snapshot() []tsEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]tsEvent(nil), p.events...)
}

// logs are the warnings and errors the SDK logged, but for the one a worker without workflows
// always logs.
func (p *sdkProcess) logs() []tsEvent {
	var out []tsEvent
	for _, ev := range p.snapshot() {
		if ev.Event == "log" && !strings.HasPrefix(ev.Message, "No workflows registered") {
			out = append(out, ev)
		}
	}
	return out
}

func startTSWorker(t *testing.T, node, dir, address, taskQueue, name string) *sdkProcess {
	t.Helper()
	cmd := exec.Command(node, filepath.Join(dir, "worker.js"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "VIGIL_ADDRESS="+address, "VIGIL_TASK_QUEUE="+taskQueue, "VIGIL_WORKER_NAME="+name)
	return startSDKProcess(t, name, cmd)
}

// tsClient runs one command of client.js and decodes its answer.
func tsClient(t *testing.T, node, dir, address string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, "client.js")}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "VIGIL_ADDRESS="+address)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node client.js %s: %s", strings.Join(args, " "), out)
	var answer map[string]any
	require.NoError(t, json.Unmarshal(out, &answer), "node client.js %s printed %q", strings.Join(args, " "), out)
	return answer
}

// TestTypeScriptSDK runs the TypeScript SDK as a user would: its worker heartbeats and is
// listed with its SDK's name and version; its client starts a standalone activity with only a
// StartToClose timeout; the worker running it is SIGKILLed mid-attempt and a second worker
// completes it; the client describes, cancels and terminates activities; a graceful shutdown is
// SHUTDOWN; and the SDK logs no warning or error about the server.
func TestTypeScriptSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	node, dir := typescriptSDK(t)
	cluster := testcluster.New(t, testcluster.Options{})
	address := cluster.Address()
	c := dialSDK(t, address)
	liveness := dialLiveness(t, address)
	ctx := context.Background()
	const queue = "ts-activities"
	livenessOf := func(t *testing.T, name string) *livenesspb.WorkerLiveness {
		t.Helper()
		key := waitForWorkerSeen(t, c, name)
		resp, err := liveness.DescribeWorkerLiveness(ctx, &livenesspb.DescribeWorkerLivenessRequest{Namespace: "default", WorkerInstanceKey: key})
		require.NoError(t, err)
		return resp.GetWorker()
	}

	first := startTSWorker(t, node, dir, address, queue, "ts-first")
	listed := waitForWorker(t, c, `WorkerIdentity = "ts-first"`)

	t.Run("ListedWithItsSDK", func(t *testing.T) {
		described, err := c.WorkflowService().DescribeWorker(ctx, &workflowservice.DescribeWorkerRequest{
			Namespace: "default", WorkerInstanceKey: listed.GetWorkerInstanceKey()})
		require.NoError(t, err)
		hb := described.GetWorkerInfo().GetWorkerHeartbeat()
		require.Equal(t, enumspb.WORKER_STATUS_RUNNING, hb.GetStatus())
		require.Equal(t, "temporal-typescript", hb.GetSdkName())
		require.Equal(t, tsSDKVersion, hb.GetSdkVersion())
		require.Equal(t, queue, hb.GetTaskQueue())
		require.NotEmpty(t, hb.GetHostInfo().GetHostName())
	})

	var second *sdkProcess
	outer := t // the second worker outlives the subtest that starts it
	t.Run("StartToCloseOnlyRunsAndMovesOnAWorkersDeath", func(t *testing.T) {
		tsClient(t, node, dir, address, "start", "ts-crash", queue, "ts-first")
		attempt := first.started(t, "ts-crash")
		require.Equal(t, 1, attempt.Attempt)

		second = startTSWorker(outer, node, dir, address, queue, "ts-second")
		waitForWorker(t, c, `WorkerIdentity = "ts-second"`)
		require.Empty(t, first.logs(), "the SDK logged warnings or errors")
		require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))

		rerun := second.started(t, "ts-crash")
		require.Equal(t, 2, rerun.Attempt)
		require.Equal(t, map[string]any{"result": "done by ts-second"}, tsClient(t, node, dir, address, "result", "ts-crash"))

		dead := livenessOf(t, "ts-first")
		require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_INACTIVE, dead.GetState())
		require.Equal(t, livenesspb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST, dead.GetInactiveReason())

		described := tsClient(t, node, dir, address, "describe", "ts-crash")
		require.Equal(t, "COMPLETED", described["status"])
		require.EqualValues(t, 2, described["attempt"])
		require.EqualValues(t, (10 * time.Minute).Milliseconds(), described["startToCloseTimeoutMs"])
		require.Equal(t, "ts-second", described["lastWorkerIdentity"])
	})
	require.NotNil(t, second, "the worker-death subtest failed")

	t.Run("CancelFromTheClient", func(t *testing.T) {
		tsClient(t, node, dir, address, "start", "ts-cancel", queue, "*")
		second.started(t, "ts-cancel")
		tsClient(t, node, dir, address, "cancel", "ts-cancel")
		result := tsClient(t, node, dir, address, "result", "ts-cancel")
		require.Contains(t, result, "failure", "a cancelled activity has no result")
		require.Equal(t, "CANCELED", tsClient(t, node, dir, address, "describe", "ts-cancel")["status"])
	})

	t.Run("TerminateFromTheClient", func(t *testing.T) {
		tsClient(t, node, dir, address, "start", "ts-terminate", queue, "*")
		second.started(t, "ts-terminate")
		tsClient(t, node, dir, address, "terminate", "ts-terminate")
		result := tsClient(t, node, dir, address, "result", "ts-terminate")
		require.Contains(t, result, "failure", "a terminated activity has no result")
		require.Equal(t, "TERMINATED", tsClient(t, node, dir, address, "describe", "ts-terminate")["status"])
	})

	t.Run("GracefulShutdownIsShutdown", func(t *testing.T) {
		require.NoError(t, second.cmd.Process.Signal(syscall.SIGINT))
		second.waitFor(t, "a graceful stop", func(ev tsEvent) bool { return ev.Event == "stopped" })
		gone := livenessOf(t, "ts-second")
		require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_INACTIVE, gone.GetState())
		require.Equal(t, livenesspb.InactiveReason_INACTIVE_REASON_SHUTDOWN, gone.GetInactiveReason())
	})

	// A terminated attempt's worker is told to stop, and its cancellation is then refused: the
	// activity is closed. The SDK says so at WARN, as it does against Temporal.
	var unexpected []tsEvent
	for _, ev := range second.logs() {
		if !(strings.HasPrefix(ev.Message, "Activity not found on completion") &&
			strings.Contains(fmt.Sprint(ev.Meta), "activity ts-terminate:")) {
			unexpected = append(unexpected, ev)
		}
	}
	require.Empty(t, unexpected, "the SDK logged warnings or errors")
}

// waitForWorkerSeen returns the instance key of the one worker with this identity, whatever
// its status.
func waitForWorkerSeen(t *testing.T, c interface {
	WorkflowService() workflowservice.WorkflowServiceClient
}, identity string) string {
	t.Helper()
	var key string
	require.Eventually(t, func() bool {
		resp, err := c.WorkflowService().ListWorkers(context.Background(), &workflowservice.ListWorkersRequest{
			Namespace: "default", Query: `WorkerIdentity = "` + identity + `"`})
		require.NoError(t, err)
		if len(resp.GetWorkers()) != 1 {
			return false
		}
		key = resp.GetWorkers()[0].GetWorkerInstanceKey()
		return true
	}, 30*time.Second, 50*time.Millisecond)
	return key
}

// startGoWorker runs a stock Go SDK worker process (TestSDKWorkerProcess) with the same
// activity as the TypeScript worker.
func startGoWorker(t *testing.T, address, taskQueue, name string) *sdkProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSDKWorkerProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), envWorkerAddress+"="+address, envWorkerTaskQueue+"="+taskQueue, envWorkerIdentity+"="+name)
	return startSDKProcess(t, name, cmd)
}

// TestTypeScriptAndGoWorkersShareAQueue runs a TypeScript worker and a Go worker on one task
// queue: the crash of either moves its running activity to the other.
func TestTypeScriptAndGoWorkersShareAQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	node, dir := typescriptSDK(t)
	cluster := testcluster.New(t, testcluster.Options{})
	address := cluster.Address()
	c := dialSDK(t, address)
	const queue = "mixed"
	goFirst := startGoWorker(t, address, queue, "go-first")
	waitForWorker(t, c, `WorkerIdentity = "go-first"`)

	var ts *sdkProcess
	outer := t // the TypeScript worker outlives the subtest that starts it
	t.Run("GoWorkerDiesTypeScriptWorkerRunsIt", func(t *testing.T) {
		tsClient(t, node, dir, address, "start", "from-go", queue, "go-first")
		goFirst.started(t, "from-go")
		ts = startTSWorker(outer, node, dir, address, queue, "ts-peer")
		waitForWorker(t, c, `WorkerIdentity = "ts-peer"`)
		require.NoError(t, goFirst.cmd.Process.Signal(syscall.SIGKILL))
		killed := time.Now()
		require.Equal(t, 2, ts.started(t, "from-go").Attempt)
		t.Logf("from-go ran again on the TypeScript worker %v after the Go worker was killed", time.Since(killed).Round(time.Millisecond))
		require.Equal(t, map[string]any{"result": "done by ts-peer"}, tsClient(t, node, dir, address, "result", "from-go"))
	})
	require.NotNil(t, ts, "the first subtest failed")

	t.Run("TypeScriptWorkerDiesGoWorkerRunsIt", func(t *testing.T) {
		tsClient(t, node, dir, address, "start", "from-ts", queue, "ts-peer")
		ts.started(t, "from-ts")
		goSecond := startGoWorker(t, address, queue, "go-second")
		waitForWorker(t, c, `WorkerIdentity = "go-second"`)
		require.NoError(t, ts.cmd.Process.Signal(syscall.SIGKILL))
		killed := time.Now()
		require.Equal(t, 2, goSecond.started(t, "from-ts").Attempt)
		t.Logf("from-ts ran again on the Go worker %v after the TypeScript worker was killed", time.Since(killed).Round(time.Millisecond))
		require.Equal(t, map[string]any{"result": "done by go-second"}, tsClient(t, node, dir, address, "result", "from-ts"))
	})
}
