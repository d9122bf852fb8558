package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

const (
	envActivityWorkerAddress = "VIGIL_TEST_ACTIVITY_WORKER_ADDRESS"
	envActivityWorkerQueue   = "VIGIL_TEST_ACTIVITY_WORKER_QUEUE"
	envActivityWorkerName    = "VIGIL_TEST_ACTIVITY_WORKER_NAME"
	envActivityWorkerEvents  = "VIGIL_TEST_ACTIVITY_WORKER_EVENTS"
	envActivityWorkerHold    = "VIGIL_TEST_ACTIVITY_WORKER_HOLD"
)

// workActivity is what test workers run: it records that it started (and how it ended) in an
// events file the test reads, holds for the given time (or until cancelled), and returns
// "done by <worker>". A worker started with a hold override holds that long instead, whatever
// the activity's input says (the worker that takes over finishes at once).
func workActivity(worker, eventsPath string, holdOverride *time.Duration) func(ctx context.Context, hold time.Duration) (string, error) {
	return func(ctx context.Context, hold time.Duration) (string, error) {
		if holdOverride != nil {
			hold = *holdOverride
		}
		info := activity.GetInfo(ctx)
		appendEvent(eventsPath, fmt.Sprintf("%s started %s attempt=%d", worker, info.ActivityID, info.Attempt))
		select {
		case <-time.After(hold):
			appendEvent(eventsPath, fmt.Sprintf("%s finished %s", worker, info.ActivityID))
			return "done by " + worker, nil
		case <-ctx.Done():
			appendEvent(eventsPath, fmt.Sprintf("%s cancelled %s", worker, info.ActivityID))
			return "", ctx.Err()
		}
	}
}

var eventsMu sync.Mutex

// appendEvent writes one line durably, so it survives a SIGKILL right after.
func appendEvent(path, line string) {
	eventsMu.Lock()
	defer eventsMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), line)
	_ = f.Sync()
}

// TestActivityWorkerProcess is not a test: it is an SDK worker process running workActivity,
// started, stopped and killed by the activity functional tests.
func TestActivityWorkerProcess(t *testing.T) {
	address := os.Getenv(envActivityWorkerAddress)
	if address == "" {
		t.Skip("runs only as a subprocess of a functional test")
	}
	name := os.Getenv(envActivityWorkerName)
	c, err := client.Dial(client.Options{
		HostPort: address, Identity: name, WorkerHeartbeatInterval: time.Second, Logger: quietLogger{},
	})
	require.NoError(t, err)
	w := sdkworker.New(c, os.Getenv(envActivityWorkerQueue), sdkworker.Options{})
	var holdOverride *time.Duration
	if v := os.Getenv(envActivityWorkerHold); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		holdOverride = &d
	}
	w.RegisterActivityWithOptions(workActivity(name, os.Getenv(envActivityWorkerEvents), holdOverride), activity.RegisterOptions{Name: "work"})
	require.NoError(t, w.Start())
	fmt.Println("worker started")
	select {}
}

type activityWorker struct {
	name string
	cmd  *exec.Cmd
}

// startActivityWorker runs TestActivityWorkerProcess as name and waits until it started.
// holdOverride ("" = none) makes it hold every activity that long.
func startActivityWorker(t *testing.T, address, taskQueue, name, events, holdOverride string) *activityWorker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestActivityWorkerProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(),
		envActivityWorkerAddress+"="+address, envActivityWorkerQueue+"="+taskQueue,
		envActivityWorkerName+"="+name, envActivityWorkerEvents+"="+events, envActivityWorkerHold+"="+holdOverride)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// The process prints "worker started" once its SDK worker runs; anything before that is
	// why it did not (a failed dial prints the test failure and exits).
	started, exited := make(chan struct{}), make(chan string, 1)
	go func() {
		var before []string
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if strings.Contains(scanner.Text(), "worker started") {
				close(started)
				for scanner.Scan() { // drain
				}
				return
			}
			before = append(before, scanner.Text())
		}
		exited <- strings.Join(before, "\n")
	}()
	select {
	case <-started:
	case out := <-exited:
		t.Fatalf("activity worker %s exited before it started:\n%s", name, out)
	case <-time.After(60 * time.Second):
		t.Fatalf("activity worker %s did not start", name)
	}
	return &activityWorker{name: name, cmd: cmd}
}

type event struct {
	at   time.Time
	text string
}

// waitForEvent waits until a line containing text appears in the events file and returns when
// it was written.
func waitForEvent(t *testing.T, path, text string) event {
	t.Helper()
	var found event
	require.Eventually(t, func() bool {
		for _, e := range readEvents(path) {
			if strings.Contains(e.text, text) {
				found = e
				return true
			}
		}
		return false
	}, 60*time.Second, 20*time.Millisecond, "no event %q", text)
	return found
}

// waitForEventAfter is waitForEvent for a line written after a moment.
func waitForEventAfter(t *testing.T, path, text string, after time.Time) event {
	t.Helper()
	var found event
	require.Eventually(t, func() bool {
		for _, e := range readEvents(path) {
			if strings.Contains(e.text, text) && e.at.After(after) {
				found = e
				return true
			}
		}
		return false
	}, 60*time.Second, 20*time.Millisecond, "no event %q after %v", text, after)
	return found
}

func hasEvent(path, text string) bool {
	for _, e := range readEvents(path) {
		if strings.Contains(e.text, text) {
			return true
		}
	}
	return false
}

func readEvents(path string) []event {
	eventsMu.Lock()
	defer eventsMu.Unlock()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var out []event
	for _, line := range strings.Split(string(data), "\n") {
		stamp, text, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			continue
		}
		out = append(out, event{at: at, text: text})
	}
	return out
}

func eventsFile(t *testing.T) string { return filepath.Join(t.TempDir(), "events") }

// explainOnFailure logs, if the test fails, what the server holds of the workers of namespace
// default and of the activities named: a failed wait for a worker's event then says where the
// activity was (its state, attempt and worker) and which workers were alive. Register it after
// the cluster, so that it runs before the cluster stops.
func explainOnFailure(t *testing.T, address string, activityIDs ...string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Logf("explain: %v", err)
			return
		}
		defer func() { _ = conn.Close() }()
		workers, err := livenesspb.NewWorkerLivenessServiceClient(conn).ListWorkerLiveness(ctx, &livenesspb.ListWorkerLivenessRequest{Namespace: "default"})
		if err != nil {
			t.Logf("explain: workers: %v", err)
		}
		for _, w := range workers.GetWorkers() {
			t.Logf("explain: worker %s", protojson.Format(w))
		}
		for _, id := range activityIDs {
			resp, err := workflowservice.NewWorkflowServiceClient(conn).DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{
				Namespace: "default", ActivityId: id, IncludeLastFailure: true,
			})
			if err != nil {
				t.Logf("explain: activity %s: %v", id, err)
				continue
			}
			t.Logf("explain: activity %s: %s", id, protojson.Format(resp.GetInfo()))
		}
	})
}
