package tests

import (
	"context"
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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	activitylib "github.com/vigilhq/vigil/chasm/activity"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// lossyNetwork sits between an SDK worker and the server (a gRPC client interceptor) and
// loses what a server crash would: the first activity task a poll returns (the server has
// committed the start; the worker never sees it), or every completion of the first task it
// delivered, until the SDK gives up.
type lossyNetwork struct {
	dropFirstTask       bool
	refuseFirstComplete bool

	mu       sync.Mutex
	lostTask []byte // the token of the task whose poll response was lost
	refused  []byte // the token whose completions are refused
	refusals int
}

func (n *lossyNetwork) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if n.refuseFirstComplete && strings.HasSuffix(method, "/RespondActivityTaskCompleted") {
		token := req.(*workflowservice.RespondActivityTaskCompletedRequest).GetTaskToken()
		n.mu.Lock()
		if n.refused == nil {
			n.refused = token
		}
		refuse := string(n.refused) == string(token)
		if refuse {
			n.refusals++
		}
		n.mu.Unlock()
		if refuse {
			return status.Error(codes.Unavailable, "test: the server is restarting")
		}
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil && n.dropFirstTask && strings.HasSuffix(method, "/PollActivityTaskQueue") {
		token := reply.(*workflowservice.PollActivityTaskQueueResponse).GetTaskToken()
		n.mu.Lock()
		defer n.mu.Unlock()
		if len(token) > 0 && n.lostTask == nil {
			n.lostTask = token
			return status.Error(codes.Unavailable, "test: connection reset before the response arrived")
		}
	}
	return err
}

func (n *lossyNetwork) lostToken() []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lostTask
}

func (n *lossyNetwork) refusedToken() ([]byte, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.refused, n.refusals
}

// startLossyWorker runs an in-process SDK worker (heartbeats every second) behind network.
func startLossyWorker(t *testing.T, address, name, events string, network *lossyNetwork) {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort: address, Identity: name, WorkerHeartbeatInterval: time.Second, Logger: quietLogger{},
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(network.intercept)}},
	})
	require.NoError(t, err)
	w := sdkworker.New(c, "q", sdkworker.Options{})
	w.RegisterActivityWithOptions(workActivity(name, events, nil), activity.RegisterOptions{Name: "work"})
	require.NoError(t, w.Start())
	t.Cleanup(func() {
		w.Stop()
		c.Close()
	})
}

// completeWithToken is the old attempt's late completion, sent as the worker would.
func completeWithToken(t *testing.T, address string, token []byte) error {
	t.Helper()
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = workflowservice.NewWorkflowServiceClient(conn).RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{
		Namespace: "default", TaskToken: token, Identity: "late",
	})
	return err
}

// TestOrphanOfLostPollResponseRunsAgain: the server recorded the start and dispatched the
// attempt, but the poll response never reached the worker. The worker keeps heartbeating and
// polling, so liveness alone would leave the activity to its 10-minute StartToClose; the slot
// count shows the worker does not run it, and it runs again within seconds.
func TestOrphanOfLostPollResponseRunsAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{DynamicConfig: shortLeases})
	events := eventsFile(t)
	network := &lossyNetwork{dropFirstTask: true}
	startLossyWorker(t, cluster.Address(), "A", events, network)
	c := dialSDK(t, cluster.Address())

	started := time.Now()
	handle := startActivity(t, c, "a-1", "q", 0)
	require.Equal(t, "done by A", result(t, handle))
	took := time.Since(started)
	t.Logf("the orphaned activity completed %v after its start (StartToClose 10m)", took.Round(time.Millisecond))
	require.Less(t, took, 2*time.Minute, "well within StartToClose")
	require.NotNil(t, network.lostToken(), "a poll response was lost")
	require.Equal(t, 1, countEvents(events, "A started a-1"), "the worker ran it once: the lost attempt never ran")
	require.Eventually(t, func() bool {
		return metricAtLeast(t, cluster, metrics.WorkerOrphansFound.ExportedName(), 1)
	}, 30*time.Second, 100*time.Millisecond, "the orphan was counted")

	// The lost attempt, should it surface, is fenced off by its stamp.
	requireNotFoundCode(t, completeWithToken(t, cluster.Address(), network.lostToken()))
}

// TestOrphanOfLostCompletionRunsAgain: the worker ran the activity, but every completion was
// refused until the SDK gave up (its 10 s RPC deadline), as during a string of server
// restarts. The server never heard the result; the freed slot shows it, the activity runs
// again, and the first attempt's late completion is refused.
func TestOrphanOfLostCompletionRunsAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{DynamicConfig: shortLeases})
	events := eventsFile(t)
	network := &lossyNetwork{refuseFirstComplete: true}
	startLossyWorker(t, cluster.Address(), "A", events, network)
	c := dialSDK(t, cluster.Address())

	started := time.Now()
	handle := startActivity(t, c, "a-1", "q", 0)
	require.Equal(t, "done by A", result(t, handle))
	took := time.Since(started)
	t.Logf("the orphaned activity completed %v after its start (StartToClose 10m; the SDK gives up on a completion after 10s)", took.Round(time.Millisecond))
	require.Less(t, took, 2*time.Minute, "well within StartToClose")
	token, refusals := network.refusedToken()
	require.Greater(t, refusals, 1, "the SDK retried the completion before it gave up")
	require.Equal(t, 2, countEvents(events, "A started a-1"), "ran again after its completion was lost")
	require.Eventually(t, func() bool {
		return metricAtLeast(t, cluster, activitylib.ActivityOrphansRescheduled.ExportedName(), 1)
	}, 30*time.Second, 100*time.Millisecond, "the orphan was counted")

	requireNotFoundCode(t, completeWithToken(t, cluster.Address(), token))
}

// TestLongActivityWithoutHeartbeatsIsNeverOrphaned: a live worker running one long activity
// that records no activity heartbeats keeps it over many worker heartbeats.
func TestLongActivityWithoutHeartbeatsIsNeverOrphaned(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{DynamicConfig: shortLeases})
	events := eventsFile(t)
	startLossyWorker(t, cluster.Address(), "A", events, &lossyNetwork{})
	c := dialSDK(t, cluster.Address())

	handle := startActivity(t, c, "a-1", "q", 25*time.Second) // 25 worker heartbeats, 2.5x the detection time
	require.Equal(t, "done by A", result(t, handle))
	require.Equal(t, 1, countEvents(events, "A started a-1"), "never taken away and run again")
	// Metrics are exported periodically: once the heartbeats of the whole run show, so would
	// an orphan found during it.
	require.Eventually(t, func() bool {
		return metricAtLeast(t, cluster, metrics.WorkerHeartbeats.ExportedName(), 20)
	}, 30*time.Second, 100*time.Millisecond)
	v, _ := scrapeMetric(t, cluster.HTTPAddress(), metrics.WorkerOrphansFound.ExportedName())
	require.Zero(t, v, "no false orphan")
}

func countEvents(path, text string) int {
	n := 0
	for _, e := range readEvents(path) {
		if strings.Contains(e.text, text) {
			n++
		}
	}
	return n
}

func requireNotFoundCode(t *testing.T, err error) {
	t.Helper()
	require.Equal(t, codes.NotFound, status.Code(err), "late completion: %v", err)
}
