package frontend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/chasm"
	vigilactivity "github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/history/historytest"
	"github.com/vigilhq/vigil/matching"
)

// matchingDispatcher is the activity component's Dispatcher over a matcher.
type matchingDispatcher struct{ m *matching.Matcher }

func (d matchingDispatcher) AddActivityTask(_ context.Context, ref vigilactivity.ActivityTaskRef) error {
	return d.m.AddActivityTask(matching.ActivityTaskRef{
		NamespaceID: ref.NamespaceID, TaskQueue: ref.TaskQueue, ActivityID: ref.ActivityID,
		RunID: ref.RunID, Stamp: ref.Stamp, ScheduledTime: ref.ScheduledTime,
	})
}

// matchingCommandSender is the activity component's CommandSender over a matcher, with the
// frontend's command encoding.
type matchingCommandSender struct{ m *matching.Matcher }

func (s matchingCommandSender) SendCancelActivity(_ context.Context, namespaceID, controlQueue string, taskToken []byte) error {
	cmd, err := frontend.NewCancelActivityCommand(taskToken)
	if err != nil {
		return err
	}
	return s.m.AddWorkerCommand(namespaceID, controlQueue, cmd)
}

// TestSDKStandaloneActivityEndToEnd runs standalone activities started with the stock SDK's
// client.ExecuteActivity on a stock SDK worker, through the frontend, a real matcher and a
// real history host: one completes, one is cancelled through a worker command (it does not
// heartbeat, so the command is the only way the cancellation can reach it).
func TestSDKStandaloneActivityEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a history host and an SDK worker")
	}
	t.Parallel()
	c := startActivityE2E(t)
	w := sdkworker.New(c, "e2e-activities", sdkworker.Options{DisableWorkflowWorker: true})
	w.RegisterActivityWithOptions(func(_ context.Context, name string) (string, error) {
		return "hello " + name, nil
	}, activity.RegisterOptions{Name: "greet"})
	started := make(chan struct{}, 1)
	w.RegisterActivityWithOptions(func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}, activity.RegisterOptions{Name: "block"})
	require.NoError(t, w.Start())
	stopped := false
	stopWorker := func() {
		if !stopped {
			stopped = true
			w.Stop()
		}
	}
	defer stopWorker()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("Completes", func(t *testing.T) {
		handle, err := c.ExecuteActivity(ctx, client.StartActivityOptions{
			ID: "greet-1", TaskQueue: "e2e-activities", StartToCloseTimeout: 10 * time.Second,
		}, "greet", "vigil")
		require.NoError(t, err)
		require.NotEmpty(t, handle.GetRunID())
		var greeting string
		require.NoError(t, handle.Get(ctx, &greeting))
		require.Equal(t, "hello vigil", greeting)
	})

	// Payloads many times an HTTP/2 stream's default window (64 KiB) travel both ways: the
	// frontend fixes its connection window (connWindow), and a larger message must still widen
	// its stream's window as it is read.
	t.Run("LargeInputAndResult", func(t *testing.T) {
		name := strings.Repeat("v", 1<<20)
		handle, err := c.ExecuteActivity(ctx, client.StartActivityOptions{
			ID: "greet-large", TaskQueue: "e2e-activities", StartToCloseTimeout: 10 * time.Second,
		}, "greet", name)
		require.NoError(t, err)
		var greeting string
		require.NoError(t, handle.Get(ctx, &greeting))
		require.Equal(t, "hello "+name, greeting)
	})

	t.Run("CancelledThroughAWorkerCommand", func(t *testing.T) {
		handle, err := c.ExecuteActivity(ctx, client.StartActivityOptions{
			ID: "block-1", TaskQueue: "e2e-activities", ScheduleToCloseTimeout: 50 * time.Second,
		}, "block")
		require.NoError(t, err)
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the activity never started")
		}
		require.NoError(t, handle.Cancel(ctx, client.CancelActivityOptions{Reason: "test"}))
		err = handle.Get(ctx, nil)
		var canceled *temporal.CanceledError
		require.True(t, errors.As(err, &canceled), "want a CanceledError, got %v", err)
	})

	t.Run("StopIsPromptWithPollCompletionOnShutdown", func(t *testing.T) {
		start := time.Now()
		stopWorker()
		require.Less(t, time.Since(start), 10*time.Second)
	})
}

// startActivityE2E starts a frontend, a real matcher and a real history host with the
// activity and worker libraries, and returns an SDK client of the default namespace.
func startActivityE2E(t *testing.T) client.Client {
	t.Helper()
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	dcClient := dynamicconfig.NewMemoryClient()
	dc := dynamicconfig.NewCollection(dcClient, logger)

	const numShards = 4
	membership := &history.LocalMembership{}
	router := history.NewRouter(numShards, membership)
	t.Cleanup(func() { _ = router.Close() })
	matcher := matching.New(nil, matching.Options{}, logger, nil)
	matcher.Start()
	t.Cleanup(matcher.Stop)

	activityConfig := vigilactivity.NewConfig(dc, numShards)
	workerConfig := worker.NewConfig(dc, numShards)
	libs := []chasm.Library{
		vigilactivity.NewLibrary(activityConfig, matchingDispatcher{matcher}, &vigilactivity.RemoteWorkerBinder{Router: router},
			matchingCommandSender{matcher}, tally.NoopScope, logger),
		worker.NewLibrary(workerConfig, &worker.RemoteRescheduler{Router: router}, tally.NoopScope, logger),
	}
	host := historytest.Start(t, historytest.Options{
		NumShards: numShards, Libraries: libs, DynamicConfig: dcClient, Logger: logger,
		Services: func(e *history.Engine) []history.ServiceRegistration {
			activities := vigilactivity.NewHandler(e, activityConfig, tally.NoopScope, logger)
			workers := worker.NewHandler(e, workerConfig, clock.NewRealTimeSource(), tally.NoopScope, logger)
			return []history.ServiceRegistration{func(s grpc.ServiceRegistrar) {
				activitypb.RegisterActivityHistoryServiceServer(s, activities)
				workerpb.RegisterWorkerHistoryServiceServer(s, workers)
				workerpb.RegisterActivityReschedulerServiceServer(s, worker.NewRescheduleServer(activities))
			}}
		},
	})
	membership.SetAddress(host.Server.Address())

	deps := frontend.Deps{
		History:       frontend.NewHistoryClient(router),
		Matching:      matcher,
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

	c, err := client.Dial(client.Options{HostPort: server.Address(), Namespace: namespace.DefaultName, Logger: quietLogger{}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}
