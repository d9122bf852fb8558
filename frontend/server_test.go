package frontend

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/errordetails/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/mock/gomock"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend/auth"
)

// serverEnv is a testEnv behind a real gRPC server on 127.0.0.1, and plain clients that
// compress every request with gzip, as the SDK does.
type serverEnv struct {
	*testEnv
	server   *Server
	scope    tally.TestScope
	workflow workflowservice.WorkflowServiceClient
	liveness livenesspb.WorkerLivenessServiceClient
	conn     *grpc.ClientConn
}

func startServer(t *testing.T, configure func(*testEnv)) *serverEnv {
	t.Helper()
	env := newTestEnv(t)
	if configure != nil {
		configure(env)
	}
	scope := tally.NewTestScope("", nil)
	env.deps.MetricsScope = scope
	server, err := NewServer(ServerConfig{Address: "127.0.0.1:0"}, env.deps, env.workflow, env.liveness)
	require.NoError(t, err)
	server.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		server.Stop(ctx)
	})
	conn, err := grpc.NewClient(server.Address(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &serverEnv{
		testEnv:  env,
		server:   server,
		scope:    scope,
		workflow: workflowservice.NewWorkflowServiceClient(conn),
		liveness: livenesspb.NewWorkerLivenessServiceClient(conn),
		conn:     conn,
	}
}

func TestServerOverGRPC(t *testing.T) {
	t.Parallel()

	t.Run("GzipRequestsReachTheHandlers", func(t *testing.T) {
		t.Parallel()
		env := startServer(t, nil)
		env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).DoAndReturn(
			func(_ context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
				return okResults(req), nil
			})
		_, err := env.workflow.RecordWorkerHeartbeat(context.Background(), &workflowservice.RecordWorkerHeartbeatRequest{
			Namespace: testNamespace, WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{heartbeatOf("w-1")},
		})
		require.NoError(t, err)
		info, err := env.workflow.GetSystemInfo(context.Background(), &workflowservice.GetSystemInfoRequest{})
		require.NoError(t, err)
		require.True(t, info.GetCapabilities().GetInternalErrorDifferentiation())
	})

	// What a client may send ahead of the server's acknowledgements: the whole connection
	// window from the start (connWindow), not grpc-go's 64 KiB, which grows only as fast as
	// acknowledgements that lag under load.
	t.Run("ClientsMaySendTheConnectionWindowAhead", func(t *testing.T) {
		t.Parallel()
		env := startServer(t, nil)
		raw, err := net.Dial("tcp", env.server.Address())
		require.NoError(t, err)
		defer raw.Close()
		// Only a guard against a hung server: the frames below come at once.
		require.NoError(t, raw.SetDeadline(time.Now().Add(time.Minute)))
		_, err = io.WriteString(raw, http2.ClientPreface)
		require.NoError(t, err)
		framer := http2.NewFramer(raw, raw)
		require.NoError(t, framer.WriteSettings())
		// The server's own SETTINGS and connection WINDOW_UPDATE precede its
		// acknowledgement of ours.
		window := int64(65535) // RFC 9113's initial window
		for {
			frame, err := framer.ReadFrame()
			require.NoError(t, err)
			if f, ok := frame.(*http2.WindowUpdateFrame); ok && f.StreamID == 0 {
				window += int64(f.Increment)
			}
			if f, ok := frame.(*http2.SettingsFrame); ok && f.IsAck() {
				break
			}
		}
		require.Equal(t, int64(connWindow), window)
	})

	t.Run("ServiceErrorsKeepTheirCode", func(t *testing.T) {
		t.Parallel()
		env := startServer(t, nil)
		env.history.EXPECT().DescribeWorker(gomock.Any(), gomock.Any()).Return(nil, serviceerror.NewNotFound("no such worker"))
		_, err := env.workflow.DescribeWorker(context.Background(), &workflowservice.DescribeWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		require.Equal(t, codes.NotFound, status.Code(err), "a serviceerror must not reach the client as Unknown: %v", err)

		_, err = env.workflow.DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Namespace: "nope"})
		var nsNotFound *serviceerror.NamespaceNotFound
		require.ErrorAs(t, serviceerror.FromStatus(status.Convert(err)), &nsNotFound, "details survive: %v", err)
	})

	t.Run("UnexpectedErrorIsInternal", func(t *testing.T) {
		t.Parallel()
		env := startServer(t, nil)
		env.history.EXPECT().DrainWorker(gomock.Any(), gomock.Any()).Return(nil, errors.New("boom"))
		_, err := env.liveness.DrainWorker(context.Background(), &livenesspb.DrainWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		require.Equal(t, codes.Internal, status.Code(err))
	})

	t.Run("PanicIsInternal", func(t *testing.T) {
		t.Parallel()
		env := startServer(t, nil)
		env.history.EXPECT().DescribeWorker(gomock.Any(), gomock.Any()).DoAndReturn(
			func(context.Context, *workerpb.DescribeWorkerRequest) (*workerpb.DescribeWorkerResponse, error) {
				panic("history client bug")
			})
		_, err := env.workflow.DescribeWorker(context.Background(), &workflowservice.DescribeWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		require.Equal(t, codes.Internal, status.Code(err))
		require.Contains(t, status.Convert(err).Message(), "DescribeWorker")
		// The server survived.
		_, err = env.workflow.GetSystemInfo(context.Background(), &workflowservice.GetSystemInfoRequest{})
		require.NoError(t, err)
	})

	t.Run("EverythingElseIsUnimplemented", func(t *testing.T) {
		t.Parallel()
		env := startServer(t, nil)
		_, err := env.workflow.StartWorkflowExecution(context.Background(), &workflowservice.StartWorkflowExecutionRequest{Namespace: testNamespace})
		require.Equal(t, codes.Unimplemented, status.Code(err))
		require.Contains(t, status.Convert(err).Message(), "not implemented", "the SDK recognises this text")
	})

	t.Run("MetricsByOperationAndCode", func(t *testing.T) {
		t.Parallel()
		env := startServer(t, nil)
		_, err := env.workflow.DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Namespace: testNamespace})
		require.NoError(t, err)
		_, err = env.workflow.DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Namespace: "nope"})
		require.Error(t, err)
		snapshot := env.scope.Snapshot()
		requests := snapshot.Counters()["rpc_requests+operation=DescribeNamespace"]
		require.NotNil(t, requests)
		require.Equal(t, int64(2), requests.Value())
		failures := snapshot.Counters()["rpc_errors+code=NotFound,operation=DescribeNamespace"]
		require.NotNil(t, failures, "counters: %v", keys(snapshot.Counters()))
		require.Equal(t, int64(1), failures.Value())
		require.NotNil(t, snapshot.Timers()["rpc_latency+operation=DescribeNamespace"])
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestValidation(t *testing.T) {
	t.Parallel()
	env := startServer(t, func(env *testEnv) {
		t.Cleanup(env.dc.OverrideNamespaceValue(dynamicconfig.MinLeaseDuration.Key(), testNamespace, "10s"))
		t.Cleanup(env.dc.OverrideNamespaceValue(dynamicconfig.MaxLeaseDuration.Key(), testNamespace, "2m"))
	})
	// No history call is expected: gomock fails the test on any.
	tooMany := &workflowservice.RecordWorkerHeartbeatRequest{Namespace: testNamespace}
	for range MaxHeartbeatsPerRequest + 1 {
		tooMany.WorkerHeartbeat = append(tooMany.WorkerHeartbeat, heartbeatOf("w-1"))
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		call    func() error
		message string
	}{
		{"MissingNamespace", func() error {
			_, err := env.workflow.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{})
			return err
		}, "namespace is required"},
		{"MissingWorkerKeyIsNamedByIndex", func() error {
			_, err := env.workflow.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{
				Namespace: testNamespace, WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{heartbeatOf("w-1"), {}},
			})
			return err
		}, "worker_heartbeat[1].worker_instance_key is required"},
		{"HostNameTooLongIsNamedByIndex", func() error {
			long := heartbeatOf("w-2")
			long.HostInfo = &workerapipb.WorkerHostInfo{HostName: strings.Repeat("h", MaxIdentityLength+1)}
			_, err := env.workflow.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{
				Namespace: testNamespace, WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{heartbeatOf("w-1"), long},
			})
			return err
		}, "worker_heartbeat[1].host_info.host_name is " + strconv.Itoa(MaxIdentityLength+1) + " bytes long"},
		{"KeyTooLong", func() error {
			_, err := env.workflow.DescribeWorker(ctx, &workflowservice.DescribeWorkerRequest{
				Namespace: testNamespace, WorkerInstanceKey: strings.Repeat("k", MaxWorkerInstanceKeyLength+1),
			})
			return err
		}, "worker_instance_key is 257 bytes long"},
		{"TooManyHeartbeats", func() error {
			_, err := env.workflow.RecordWorkerHeartbeat(ctx, tooMany)
			return err
		}, "worker_heartbeat has 1001 entries"},
		{"ShutdownSnapshotOfAnotherWorker", func() error {
			_, err := env.workflow.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{
				Namespace: testNamespace, WorkerInstanceKey: "w-1", WorkerHeartbeat: heartbeatOf("w-2"),
			})
			return err
		}, `worker_heartbeat.worker_instance_key "w-2" differs`},
		{"NegativePageSize", func() error {
			_, err := env.workflow.ListWorkers(ctx, &workflowservice.ListWorkersRequest{Namespace: testNamespace, PageSize: -1})
			return err
		}, "page_size -1 is negative"},
		{"UnknownColumn", func() error {
			_, err := env.workflow.ListWorkers(ctx, &workflowservice.ListWorkersRequest{Namespace: testNamespace, Query: "Foo = 'x'"})
			return err
		}, `unknown column "Foo"`},
		{"LeaseBelowTheNamespaceMinimum", func() error {
			_, err := env.liveness.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{
				Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-1"), LeaseDuration: durationpb.New(5 * time.Second),
			})
			return err
		}, "lease_duration 5s is outside the namespace's bounds [10s, 2m0s]"},
		{"LeaseAboveTheNamespaceMaximum", func() error {
			_, err := env.liveness.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{
				Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-1"), LeaseDuration: durationpb.New(3 * time.Minute),
			})
			return err
		}, "lease_duration 3m0s is outside"},
		{"NegativeLease", func() error {
			_, err := env.liveness.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{
				Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-1"), LeaseDuration: durationpb.New(-time.Second),
			})
			return err
		}, "lease_duration -1s is outside"},
		{"BindingWithoutActivityID", func() error {
			_, err := env.liveness.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{
				Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-1"),
				BoundActivities: []*livenesspb.ActivityBinding{{ActivityId: "a"}, {RunId: "r"}},
			})
			return err
		}, "bound_activities[1].activity_id is required"},
		{"BoundAndUnboundAtOnce", func() error {
			_, err := env.liveness.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{
				Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-1"),
				BoundActivities:   []*livenesspb.ActivityBinding{{ActivityId: "a", RunId: "r", Stamp: 1}},
				UnboundActivities: []*livenesspb.ActivityBinding{{ActivityId: "a", RunId: "r", Stamp: 1}},
			})
			return err
		}, "unbound_activities[0]: activity \"a\" (run \"r\", stamp 1) is also in bound_activities"},
		{"MissingHeartbeat", func() error {
			_, err := env.liveness.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{Namespace: testNamespace})
			return err
		}, "worker_heartbeat is required"},
		{"UnknownState", func() error {
			_, err := env.liveness.ListWorkerLiveness(ctx, &livenesspb.ListWorkerLivenessRequest{Namespace: testNamespace, State: 42})
			return err
		}, "state: 42 is not a LivenessState"},
		{"DurationWithMixedSigns", func() error {
			hb := heartbeatOf("w-1")
			hb.ElapsedSinceLastHeartbeat = &durationpb.Duration{Seconds: 1, Nanos: -5}
			_, err := env.workflow.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{
				Namespace: testNamespace, WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{hb},
			})
			return err
		}, "worker_heartbeat[0].elapsed_since_last_heartbeat is not a valid duration (1 s, -5 ns)"},
		{"TimestampBeyondYear9999", func() error {
			hb := heartbeatOf("w-1")
			hb.HeartbeatTime = &timestamppb.Timestamp{Seconds: 1 << 62}
			_, err := env.workflow.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{
				Namespace: testNamespace, WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{hb},
			})
			return err
		}, "worker_heartbeat[0].heartbeat_time is not a valid timestamp"},
		{"UnknownWorkerStatus", func() error {
			hb := heartbeatOf("w-1")
			hb.Status = 99
			_, err := env.workflow.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{
				Namespace: testNamespace, WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{hb},
			})
			return err
		}, "worker_heartbeat[0].status: 99 is not a WorkerStatus"},
		{"UnknownIDReusePolicy", func() error {
			_, err := env.workflow.StartActivityExecution(ctx, startActivityRequest(func(r *workflowservice.StartActivityExecutionRequest) {
				r.IdReusePolicy = 77
			}))
			return err
		}, "id_reuse_policy: 77 is not a ActivityIdReusePolicy"},
		{"StartToCloseOfOneNanosecond", func() error {
			_, err := env.workflow.StartActivityExecution(ctx, startActivityRequest(func(r *workflowservice.StartActivityExecutionRequest) {
				r.StartToCloseTimeout = durationpb.New(time.Nanosecond)
			}))
			return err
		}, "start_to_close_timeout 1ns is shorter than the minimum of 1ms"},
		{"StartDelayOfTenThousandYears", func() error {
			_, err := env.workflow.StartActivityExecution(ctx, startActivityRequest(func(r *workflowservice.StartActivityExecutionRequest) {
				r.StartDelay = &durationpb.Duration{Seconds: 315_576_000_000}
			}))
			return err
		}, "start_delay 2562047h47m16.854775807s is longer than the maximum"},
		{"StringNotUTF8", func() error {
			return invokeRaw(ctx, env, "/temporal.api.workflowservice.v1.WorkflowService/DescribeWorker",
				&workflowservice.DescribeWorkerRequest{}, map[string]string{"namespace": testNamespace, "worker_instance_key": "w-\xff"})
		}, "malformed request: worker_instance_key is not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			require.Contains(t, status.Convert(err).Message(), tc.message)
		})
	}

	t.Run("LeaseWithinBoundsIsAccepted", func(t *testing.T) {
		env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).DoAndReturn(
			func(_ context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
				return okResults(req), nil
			})
		_, err := env.liveness.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{
			Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-1"), LeaseDuration: durationpb.New(30 * time.Second),
		})
		require.NoError(t, err)
	})

	t.Run("TimeoutBeyondTheMaximumIsClamped", func(t *testing.T) {
		req := startActivityRequest(func(r *workflowservice.StartActivityExecutionRequest) {
			r.StartToCloseTimeout = &durationpb.Duration{Seconds: 315_576_000_000} // 10,000 years
		})
		require.NoError(t, newValidator(env.deps).validate(req))
		require.Equal(t, MaxActivityDuration, req.GetStartToCloseTimeout().AsDuration())
	})

	t.Run("PollsAreNeverInvalidArgument", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		resp, err := env.workflow.PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{
			Namespace: testNamespace, WorkerInstanceKey: strings.Repeat("k", 10*MaxWorkerInstanceKeyLength),
		})
		require.NoError(t, err)
		require.Empty(t, resp.GetTaskToken())
	})
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	env := startServer(t, func(env *testEnv) {
		// One request per 100 s: the bucket (burst 1) never refills during the test.
		t.Cleanup(env.dc.OverrideNamespaceValue(dynamicconfig.NamespaceRPS.Key(), testNamespace, 0.01))
	})
	ctx := context.Background()
	_, err := env.workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: testNamespace})
	require.NoError(t, err)
	_, err = env.workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: testNamespace})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "frontend.namespaceRPS")
	var exhausted *serviceerror.ResourceExhausted
	require.ErrorAs(t, serviceerror.FromStatus(status.Convert(err)), &exhausted)
	require.Equal(t, enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT, exhausted.Cause)
	require.Equal(t, enumspb.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE, exhausted.Scope)
	details := status.Convert(err).Details()
	require.Len(t, details, 1)
	require.IsType(t, &errordetails.ResourceExhaustedFailure{}, details[0])

	// The override is keyed by namespace name: another namespace is not limited.
	_, err = env.workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	require.NoError(t, err)
	_, err = env.workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	require.NoError(t, err)

	// Heartbeats are exempt: refused by a rate limit while the host has room, a live worker
	// would lose its lease. Both APIs' heartbeats and the shutdown reach history.
	env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
			return okResults(req), nil
		}).Times(4)
	for range 2 {
		_, err = env.workflow.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{
			Namespace: testNamespace, WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{heartbeatOf("w-1")},
		})
		require.NoError(t, err)
		_, err = env.liveness.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{
			Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-2"),
		})
		require.NoError(t, err)
	}
	env.history.EXPECT().ShutdownWorker(gomock.Any(), gomock.Any()).Return(&workerpb.ShutdownWorkerResponse{}, nil)
	_, err = env.workflow.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
	require.NoError(t, err)

	// Long polls are exempt.
	pollCtx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	_, err = env.workflow.PollWorkflowTaskQueue(pollCtx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: testNamespace})
	require.NoError(t, err)

	// A raised limit applies at once, without a restart.
	t.Cleanup(env.dc.OverrideNamespaceValue(dynamicconfig.NamespaceRPS.Key(), testNamespace, 1000))
	_, err = env.workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: testNamespace})
	require.NoError(t, err)
}

func TestStopEndsOpenPolls(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	server, err := NewServer(ServerConfig{Address: "127.0.0.1:0"}, env.deps, env.workflow, env.liveness)
	require.NoError(t, err)
	server.Start()
	conn, err := grpc.NewClient(server.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	polled := make(chan error, 1)
	go func() {
		_, err := workflowservice.NewWorkflowServiceClient(conn).PollWorkflowTaskQueue(context.Background(),
			&workflowservice.PollWorkflowTaskQueueRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		polled <- err
	}()
	require.Eventually(t, func() bool { return env.workflow.polls.open("w-1") == 1 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	server.Stop(ctx)
	require.Less(t, time.Since(start), 5*time.Second, "a graceful stop does not wait for long polls")
	require.NoError(t, <-polled, "the poll got its empty answer")
}

// TestTemporalSDKClient proves transport compatibility with the real Go SDK: Dial calls
// GetSystemInfo (gzip, SDK interceptors, metadata), then the raw service client works.
func TestTemporalSDKClient(t *testing.T) {
	t.Parallel()
	env := startServer(t, nil)
	c, err := client.Dial(client.Options{HostPort: env.server.Address(), Namespace: testNamespace, Logger: nopLogger{}})
	require.NoError(t, err)
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.WorkflowService().GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{})
	require.NoError(t, err)
	require.True(t, info.GetCapabilities().GetInternalErrorDifferentiation())

	ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: testNamespace})
	require.NoError(t, err)
	require.True(t, ns.GetNamespaceInfo().GetCapabilities().GetWorkerHeartbeats())
	require.True(t, ns.GetNamespaceInfo().GetCapabilities().GetWorkerCommands())

	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "nope"})
	var nsNotFound *serviceerror.NamespaceNotFound
	require.ErrorAs(t, err, &nsNotFound, "the SDK sees a typed error: %v", err)
}

type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}

func TestHTTPServer(t *testing.T) {
	t.Parallel()
	healthy := errors.New("starting")
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "rpc_requests 1\n") })
	var health error = healthy
	server, err := NewHTTPServer("127.0.0.1:0", metrics, func() error { return health }, nil)
	require.NoError(t, err)
	server.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		server.Stop(ctx)
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + server.Address() + path)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "starting")
	health = nil
	code, body = get("/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	code, body = get("/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "rpc_requests")
	code, _ = get("/debug/pprof/")
	require.Equal(t, http.StatusNotFound, code, "profiles are served only when asked for")
}

func TestHTTPServerPprof(t *testing.T) {
	t.Parallel()
	server, err := NewHTTPServer("127.0.0.1:0", nil, nil, nil, WithPprof(nil))
	require.NoError(t, err)
	server.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		server.Stop(ctx)
	}()
	resp, err := http.Get("http://" + server.Address() + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "goroutine profile:")
}

func startActivityRequest(edit func(*workflowservice.StartActivityExecutionRequest)) *workflowservice.StartActivityExecutionRequest {
	r := &workflowservice.StartActivityExecutionRequest{
		Namespace: testNamespace, ActivityId: "a-1", ActivityType: &commonpb.ActivityType{Name: "Do"},
		TaskQueue: &taskqueuepb.TaskQueue{Name: "q"}, StartToCloseTimeout: durationpb.New(time.Minute),
	}
	edit(r)
	return r
}

// invokeRaw sends a request whose string fields are given as raw bytes (Go's protobuf refuses
// to encode a string that is not UTF-8, so the test encodes it by hand).
func invokeRaw(ctx context.Context, env *serverEnv, method string, shape proto.Message, fields map[string]string) error {
	var raw []byte
	desc := shape.ProtoReflect().Descriptor()
	for name, value := range fields {
		fd := desc.Fields().ByName(protoreflect.Name(name))
		raw = protowire.AppendTag(raw, fd.Number(), protowire.BytesType)
		raw = protowire.AppendBytes(raw, []byte(value))
	}
	return env.conn.Invoke(ctx, method, rawMessage(raw), new(emptypb.Empty), grpc.ForceCodecV2(rawCodec{}))
}

type rawMessage []byte

// rawCodec sends rawMessage as is and decodes answers as protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(rawMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(m)}, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func (rawCodec) Name() string { return "proto" }

// TestServerStartingAnswersUnavailable: between Serve and Start (the server's components are
// still starting) every call is answered at once with Unavailable, which the SDK retries,
// instead of waiting on a port that accepts connections but does not serve.
func TestServerStartingAnswersUnavailable(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	server, err := NewServer(ServerConfig{Address: "127.0.0.1:0"}, env.deps, env.workflow, env.liveness)
	require.NoError(t, err)
	server.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		server.Stop(ctx)
	})
	conn, err := grpc.NewClient(server.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := workflowservice.NewWorkflowServiceClient(conn)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = client.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{Namespace: "default"})
	require.Equal(t, codes.Unavailable, status.Code(err), "starting: %v", err)
	require.NoError(t, ctx.Err(), "answered, not held until the deadline")
	_, err = client.GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{})
	require.NoError(t, err, "answered from configuration alone: client.Dial works while the server starts")

	server.Start()
	_, err = client.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{Namespace: "default"})
	require.NotEqual(t, codes.Unavailable, status.Code(err), "ready: the handler answers (%v)", err)
}

func TestHTTPServerPprofNeedsAdminWhenAuthIsOn(t *testing.T) {
	t.Parallel()
	const adminKey = "pprof-admin-key-0123456789"
	mapper, err := auth.NewDefaultClaimMapper(auth.Config{Enabled: true, AdminAPIKey: adminKey}, nil, nil)
	require.NoError(t, err)
	interceptor := auth.NewInterceptor(mapper, auth.NewDefaultAuthorizer(), auth.NewAuditor(nil, nil))
	server, err := NewHTTPServer("127.0.0.1:0", nil, nil, nil, WithPprof(interceptor.HTTPAdminGuard))
	require.NoError(t, err)
	server.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		server.Stop(ctx)
	}()
	get := func(key string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+server.Address()+"/debug/pprof/goroutine?debug=1", nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, get(""))
	require.Equal(t, http.StatusUnauthorized, get("not-the-admin-key-0123"))
	require.Equal(t, http.StatusOK, get(adminKey))
}
