package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

// rpcRecorder records how each attempt of the worker's completion calls ended (a gRPC client
// interceptor inside the SDK's retries sees every attempt).
type rpcRecorder struct {
	mu       sync.Mutex
	attempts map[codes.Code]int
	slowest  time.Duration
}

func (r *rpcRecorder) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if strings.HasSuffix(method, "/RespondActivityTaskCompleted") {
		r.mu.Lock()
		r.attempts[status.Code(err)]++
		r.slowest = max(r.slowest, time.Since(start))
		r.mu.Unlock()
	}
	return err
}

func (r *rpcRecorder) summary() (map[codes.Code]int, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[codes.Code]int, len(r.attempts))
	for k, v := range r.attempts {
		out[k] = v
	}
	return out, r.slowest
}

// TestCompletionsFailFastWhileTheServerRestarts: the server is SIGKILLed and restarted on the
// same SQLite file and port again and again while a worker completes activities. Every
// completion attempt is answered (it succeeds, or fails with Unavailable, which the SDK
// retries): none waits out the SDK's 10 s deadline, which is how completions used to be
// lost. Every activity completes with its result.
func TestCompletionsFailFastWhileTheServerRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	dir := t.TempDir()
	address := freeAddress(t)
	// Each start spends this long recovering before it serves, as a start can on a loaded
	// small host; the server is killed again 1.5 s after it serves.
	const startDelay = time.Second
	var (
		mu  sync.Mutex
		srv *exec.Cmd
	)
	startServer := func() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestServerProcess$", "-test.v=false")
		cmd.Env = append(os.Environ(), "VIGIL_TEST_SERVER_DIR="+dir, "VIGIL_TEST_SERVER_ADDRESS="+address,
			"VIGIL_TEST_SERVER_START_DELAY="+startDelay.String())
		require.NoError(t, cmd.Start())
		mu.Lock()
		srv = cmd
		mu.Unlock()
	}
	kill := func() {
		mu.Lock()
		defer mu.Unlock()
		_ = srv.Process.Signal(syscall.SIGKILL)
		_ = srv.Wait()
	}
	t.Cleanup(kill)
	waitListening := func() {
		require.Eventually(t, func() bool {
			conn, err := net.Dial("tcp", address)
			if err == nil {
				_ = conn.Close()
			}
			return err == nil
		}, 60*time.Second, 20*time.Millisecond, "server did not start")
	}
	startServer()
	waitListening()

	events := eventsFile(t)
	recorder := &rpcRecorder{attempts: make(map[codes.Code]int)}
	wc, err := client.Dial(client.Options{
		HostPort: address, Identity: "A", WorkerHeartbeatInterval: time.Second, Logger: quietLogger{},
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(recorder.intercept)}},
	})
	require.NoError(t, err)
	w := sdkworker.New(wc, "q", sdkworker.Options{})
	w.RegisterActivityWithOptions(workActivity("A", events, nil), activity.RegisterOptions{Name: "work"})
	require.NoError(t, w.Start())
	t.Cleanup(func() { w.Stop(); wc.Close() })
	c := dialSDK(t, address)

	activities := envInt("VIGIL_TEST_RESTART_ACTIVITIES", 30)
	restarts := envInt("VIGIL_TEST_RESTARTS", 8)
	handles := make([]client.ActivityHandle, 0, activities)
	for i := range activities {
		// Holds spread over the whole run, so that completions keep arriving through the
		// restarts.
		hold := time.Duration(i) * time.Duration(restarts) * (startDelay + 1900*time.Millisecond) / time.Duration(activities)
		handles = append(handles, startActivity(t, c, fmt.Sprintf("a-%d", i), "q", hold))
	}
	for range restarts {
		time.Sleep(startDelay + 1500*time.Millisecond)
		kill()
		time.Sleep(400 * time.Millisecond)
		startServer()
	}
	waitListening()

	for _, h := range handles {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var out string
		err := h.Get(ctx, &out)
		cancel()
		if err != nil {
			conn, cerr := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if cerr == nil {
				desc, derr := workflowservice.NewWorkflowServiceClient(conn).DescribeActivityExecution(context.Background(),
					&workflowservice.DescribeActivityExecutionRequest{Namespace: "default", ActivityId: h.GetID()})
				t.Logf("%s: %v %v", h.GetID(), desc, derr)
				_ = conn.Close()
			}
			for _, e := range readEvents(events) {
				if strings.Contains(e.text, h.GetID()+" ") || strings.HasSuffix(e.text, h.GetID()) {
					t.Logf("event %v %s", e.at, e.text)
				}
			}
			workers, lerr := dialLiveness(t, address).ListWorkerLiveness(context.Background(), &livenesspb.ListWorkerLivenessRequest{Namespace: "default"})
			if lerr == nil {
				for _, w := range workers.GetWorkers() {
					d, _ := dialLiveness(t, address).DescribeWorkerLiveness(context.Background(), &livenesspb.DescribeWorkerLivenessRequest{
						Namespace: "default", WorkerInstanceKey: w.GetWorkerInstanceKey(), IncludeBoundActivities: true})
					t.Logf("worker %v", d)
				}
			}
		}
		require.NoError(t, err, h.GetID())
		require.Equal(t, "done by A", out)
	}
	attempts, slowest := recorder.summary()
	t.Logf("completion attempts by code over %d restarts: %v; slowest attempt %v", restarts, attempts, slowest.Round(time.Millisecond))
	require.Zero(t, attempts[codes.DeadlineExceeded], "no completion attempt waited out its deadline")
	for code := range attempts {
		require.True(t, code == codes.OK || code == codes.Unavailable || code == codes.NotFound,
			"completion attempts end OK, Unavailable (retried) or NotFound (an attempt taken back): %v", attempts)
	}
	require.NotZero(t, attempts[codes.OK])
}

// envInt reads a test size from the environment (a larger run than CI's, by hand).
func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err != nil || n <= 0 {
		return def
	}
	return n
}
