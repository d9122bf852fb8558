package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/vigilhq/vigil/tests/testcluster"
)

const envWatchWorkerAddress = "VIGIL_TEST_WATCH_WORKER_ADDRESS"

// TestWatchSDKWorkerProcess is not a test: it is the stock SDK worker that
// TestWorkerWatchFollowsAnSDKWorker starts and kills.
func TestWatchSDKWorkerProcess(t *testing.T) {
	address := os.Getenv(envWatchWorkerAddress)
	if address == "" {
		t.Skip("runs only as a subprocess of TestWorkerWatchFollowsAnSDKWorker")
	}
	c, err := client.Dial(client.Options{HostPort: address, Identity: "watched-worker", WorkerHeartbeatInterval: time.Second, Logger: quiet{}})
	require.NoError(t, err)
	w := sdkworker.New(c, "watch-queue", sdkworker.Options{})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "noop"})
	require.NoError(t, w.Start())
	fmt.Println("worker started")
	select {}
}

type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

// lines is an io.Writer that tests can wait on.
type lines struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLines() *lines { return &lines{changed: make(chan struct{}, 1)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor waits until a line contains every one of parts and returns it.
func (l *lines) waitFor(t *testing.T, parts ...string) string {
	t.Helper()
	guard := time.After(90 * time.Second) // a failure guard, not a measurement
	for {
		for line := range strings.SplitSeq(l.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return line
			}
		}
		select {
		case <-l.changed:
		case <-guard:
			t.Fatalf("no line with %q in:\n%s", parts, l.String())
		}
	}
}

func TestWorkerWatchFollowsAnSDKWorker(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A JSON watcher from the start (the first snapshot is empty).
	jsonOut, stderr := newLines(), newLines()
	jsonDone := make(chan int, 1)
	go func() {
		jsonDone <- runContext(ctx, []string{"worker", "watch", "--address", c.Address(), "--output", "json", "--heartbeat-every", "1ms"}, jsonOut, stderr)
	}()
	jsonOut.waitFor(t, "WORKER_EVENT_TYPE_SNAPSHOT_END")

	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchSDKWorkerProcess$")
	cmd.Env = append(os.Environ(), envWatchWorkerAddress+"="+c.Address())
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		for s := bufio.NewScanner(stdout); s.Scan(); {
		}
	}()

	registered := jsonOut.waitFor(t, "WORKER_EVENT_TYPE_REGISTERED", "watched-worker")
	jsonOut.waitFor(t, "WORKER_EVENT_TYPE_HOST_ONLINE")
	jsonOut.waitFor(t, "WORKER_EVENT_TYPE_HEARTBEAT", "watched-worker")
	var ev struct{ Cursor string }
	require.NoError(t, json.Unmarshal([]byte(registered), &ev))
	require.NotEmpty(t, ev.Cursor)

	// SIGKILL: its connection closes, the worker goes INACTIVE half a second later (connection
	// suspicion), long before its lease would run out.
	require.NoError(t, cmd.Process.Kill())
	jsonOut.waitFor(t, "WORKER_EVENT_TYPE_INACTIVE", "INACTIVE_REASON_CONNECTION_LOST", "watched-worker")
	jsonOut.waitFor(t, "WORKER_EVENT_TYPE_HOST_OFFLINE")

	// The text CLI, resuming from the REGISTERED event's cursor: no snapshot, no resync, the
	// heartbeats and the expiry that followed.
	text := newLines()
	textDone := make(chan int, 1)
	go func() {
		textDone <- runContext(ctx, []string{"worker", "watch", "--address", c.Address(), "--cursor", ev.Cursor, "--heartbeat-every", "1ms"}, text, stderr)
	}()
	text.waitFor(t, "HEARTBEAT", "state=ACTIVE", "task-queue=watch-queue", "identity=watched-worker")
	text.waitFor(t, "INACTIVE", "state=INACTIVE", "reason=CONNECTION_LOST", "identity=watched-worker")
	text.waitFor(t, "HOST_OFFLINE")
	t.Log("vigil worker watch printed:\n" + text.String())
	require.NotContains(t, text.String(), "SNAPSHOT")
	require.NotContains(t, text.String(), "RESYNC")
	require.NotContains(t, text.String(), "REGISTERED", "resumed after the cursor, not at it")

	// A cursor the server cannot resume (another epoch): RESYNC, then a fresh snapshot.
	resync := newLines()
	go func() {
		_ = runContext(ctx, []string{"worker", "watch", "--address", c.Address(), "--cursor", "1-1"}, resync, stderr)
	}()
	resync.waitFor(t, "RESYNC")
	resync.waitFor(t, "SNAPSHOT ", "state=INACTIVE", "identity=watched-worker")
	resync.waitFor(t, "SNAPSHOT_END")

	// A bad query is refused at once.
	bad := newLines()
	require.Equal(t, 1, runContext(ctx, []string{"worker", "watch", "--address", c.Address(), "--query", "Nope = 1"}, newLines(), bad))
	require.Contains(t, bad.String(), "unknown column")

	cancel()
	require.Equal(t, 0, <-jsonDone)
	require.Equal(t, 0, <-textDone)
}
