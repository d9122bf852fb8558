package frontend_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/history/historytest"
)

// TestSDKWorkerEndToEnd runs a stock SDK worker against the frontend and a real history host:
// its heartbeats make it RUNNING in ListWorkers, and its shutdown makes it SHUTDOWN.
func TestSDKWorkerEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a history host and an SDK worker")
	}
	t.Parallel()
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	dcClient := dynamicconfig.NewMemoryClient()
	dc := dynamicconfig.NewCollection(dcClient, logger)

	const numShards = 4
	config := worker.NewConfig(dc, numShards)
	membership := &history.LocalMembership{}
	router := history.NewRouter(numShards, membership)
	t.Cleanup(func() { _ = router.Close() })
	lib := worker.NewLibrary(config, &worker.RemoteRescheduler{Router: router}, tally.NoopScope, logger)
	host := historytest.Start(t, historytest.Options{
		NumShards:     numShards,
		Libraries:     []chasm.Library{lib},
		DynamicConfig: dcClient,
		Logger:        logger,
		Services: func(e *history.Engine) []history.ServiceRegistration {
			handler := worker.NewHandler(e, config, clock.NewRealTimeSource(), tally.NoopScope, logger)
			return []history.ServiceRegistration{func(s grpc.ServiceRegistrar) {
				workerpb.RegisterWorkerHistoryServiceServer(s, handler)
			}}
		},
	})
	membership.SetAddress(host.Server.Address())

	deps := frontend.Deps{
		History:       frontend.NewHistoryClient(router),
		Namespaces:    namespace.MustNewRegistry(),
		DynamicConfig: dc,
		Logger:        logger,
	}
	workflow := frontend.NewWorkflowHandler(deps)
	server, err := frontend.NewServer(frontend.ServerConfig{Address: "127.0.0.1:0"}, deps, workflow, frontend.NewLivenessHandler(deps))
	require.NoError(t, err)
	server.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		server.Stop(ctx)
	})

	c, err := client.Dial(client.Options{
		HostPort:  server.Address(),
		Namespace: namespace.DefaultName,
		// The first heartbeat goes out at Worker.Start; the default interval (60 s) keeps the
		// ticker quiet during the test. A tick racing Stop sends a SHUTTING_DOWN heartbeat that
		// can reach history after ShutdownWorker and resurrect the worker (a history-side
		// question, reported), which would make the SHUTDOWN assertion flaky.
		Logger: quietLogger{},
	})
	require.NoError(t, err)
	defer c.Close()
	w := sdkworker.New(c, "e2e", sdkworker.Options{})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "noop"})
	require.NoError(t, w.Start())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list := func() []*workflowservice.ListWorkersResponse {
		resp, err := c.WorkflowService().ListWorkers(ctx, &workflowservice.ListWorkersRequest{
			Namespace: namespace.DefaultName, Query: `TaskQueue = "e2e"`,
		})
		require.NoError(t, err)
		return []*workflowservice.ListWorkersResponse{resp}
	}
	var key string
	require.Eventually(t, func() bool {
		resp := list()[0]
		if len(resp.GetWorkers()) != 1 {
			return false
		}
		key = resp.GetWorkers()[0].GetWorkerInstanceKey()
		return resp.GetWorkers()[0].GetStatus() == enumspb.WORKER_STATUS_RUNNING
	}, 20*time.Second, 100*time.Millisecond, "the worker's heartbeats reach history")

	w.Stop()
	described, err := c.WorkflowService().DescribeWorker(ctx, &workflowservice.DescribeWorkerRequest{
		Namespace: namespace.DefaultName, WorkerInstanceKey: key,
	})
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKER_STATUS_SHUTDOWN, described.GetWorkerInfo().GetWorkerHeartbeat().GetStatus(),
		"ShutdownWorker made it INACTIVE, shown as SHUTDOWN")
	count, err := c.WorkflowService().CountWorkers(ctx, &workflowservice.CountWorkersRequest{
		Namespace: namespace.DefaultName, Query: `Status = "Running"`,
	})
	require.NoError(t, err)
	require.Zero(t, count.GetCount())
}

type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
