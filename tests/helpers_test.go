package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

const (
	envWorkerAddress   = "VIGIL_TEST_WORKER_ADDRESS"
	envWorkerTaskQueue = "VIGIL_TEST_WORKER_TASK_QUEUE"
	envWorkerIdentity  = "VIGIL_TEST_WORKER_IDENTITY"
)

// TestSDKWorkerProcess is not a test: it is a stock SDK worker process that functional tests
// start and kill.
func TestSDKWorkerProcess(t *testing.T) {
	address := os.Getenv(envWorkerAddress)
	if address == "" {
		t.Skip("runs only as a subprocess of a functional test")
	}
	c, err := client.Dial(client.Options{
		HostPort:                address,
		Identity:                os.Getenv(envWorkerIdentity),
		WorkerHeartbeatInterval: time.Second,
		Logger:                  quietLogger{},
	})
	require.NoError(t, err)
	identity := os.Getenv(envWorkerIdentity)
	w := sdkworker.New(c, os.Getenv(envWorkerTaskQueue), sdkworker.Options{})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "noop"})
	// work is the activity of tests/testdata/typescript/worker.js, with the same JSON lines: it
	// blocks, heartbeating, when blockOn names this worker or is "*", and otherwise returns.
	emit := func(v map[string]any) {
		line, _ := json.Marshal(v)
		fmt.Println(string(line))
	}
	w.RegisterActivityWithOptions(func(ctx context.Context, blockOn string) (string, error) {
		info := activity.GetInfo(ctx)
		emit(map[string]any{"event": "started", "id": info.ActivityID, "attempt": info.Attempt, "worker": identity})
		if blockOn != identity && blockOn != "*" {
			return "done by " + identity, nil
		}
		for {
			activity.RecordHeartbeat(ctx)
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}, activity.RegisterOptions{Name: "work"})
	require.NoError(t, w.Start())
	fmt.Println("worker started")
	emit(map[string]any{"event": "ready"})
	select {} // until killed
}

// startWorkerProcess runs TestSDKWorkerProcess in a subprocess and waits until its worker
// started.
func startWorkerProcess(t *testing.T, address, taskQueue, identity string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSDKWorkerProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), envWorkerAddress+"="+address, envWorkerTaskQueue+"="+taskQueue, envWorkerIdentity+"="+identity)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	started := make(chan bool, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if strings.Contains(scanner.Text(), "worker started") {
				started <- true
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("the SDK worker process did not start")
	}
	return cmd
}

func dialSDK(t *testing.T, address string) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: address, WorkerHeartbeatInterval: time.Second, Logger: quietLogger{}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func dialLiveness(t *testing.T, address string) livenesspb.WorkerLivenessServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return livenesspb.NewWorkerLivenessServiceClient(conn)
}

func listAll(t *testing.T, c client.Client, query string, pageSize int32) []*workerv1.WorkerListInfo {
	t.Helper()
	var out []*workerv1.WorkerListInfo
	var token []byte
	for {
		resp, err := c.WorkflowService().ListWorkers(context.Background(), &workflowservice.ListWorkersRequest{
			Namespace: "default", Query: query, PageSize: pageSize, NextPageToken: token,
		})
		require.NoError(t, err)
		out = append(out, resp.GetWorkers()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out
		}
	}
}

// waitForWorker waits until exactly one worker matches query and is RUNNING; it returns it.
func waitForWorker(t *testing.T, c client.Client, query string) *workerv1.WorkerListInfo {
	t.Helper()
	var found *workerv1.WorkerListInfo
	require.Eventually(t, func() bool {
		workers := listAll(t, c, query, 100)
		if len(workers) != 1 || workers[0].GetStatus() != enumspb.WORKER_STATUS_RUNNING {
			return false
		}
		found = workers[0]
		return true
	}, 30*time.Second, 50*time.Millisecond, "no RUNNING worker matches %s", query)
	return found
}

type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}

// scrapeMetric reads one unlabelled-or-summed metric from the Prometheus endpoint.
func scrapeMetric(t *testing.T, httpAddress, name string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + httpAddress + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false
	}
	var total float64
	found := false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			total += v
			found = true
		}
	}
	return total, found
}
