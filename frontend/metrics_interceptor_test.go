package frontend

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/common/clock"
)

// TestLongPollEndsAreNotErrors: a long poll that returns empty or is cancelled by its client is
// counted in long_poll_ends, not rpc_errors, and its wait is kept out of rpc_latency; a real
// failure of a poll, and any failure of another RPC, is an error.
func TestLongPollEndsAreNotErrors(t *testing.T) {
	t.Parallel()

	scope := tally.NewTestScope("", nil)
	intercept := metricsInterceptor(scope, clock.NewRealTimeSource())
	call := func(method string, resp any, err error) {
		_, _ = intercept(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/temporal.api.workflowservice.v1.WorkflowService/" + method},
			func(context.Context, any) (any, error) { return resp, err })
	}
	poll := "PollActivityTaskQueue"
	call(poll, &workflowservice.PollActivityTaskQueueResponse{}, nil)
	call(poll, &workflowservice.PollActivityTaskQueueResponse{TaskToken: []byte("t")}, nil)
	call(poll, nil, status.Error(codes.Canceled, "context canceled"))
	call(poll, nil, status.Error(codes.DeadlineExceeded, "deadline exceeded"))
	call(poll, nil, status.Error(codes.PermissionDenied, "no"))
	call("RecordActivityTaskHeartbeat", nil, status.Error(codes.NotFound, "gone"))
	call("RecordActivityTaskHeartbeat", &workflowservice.RecordActivityTaskHeartbeatResponse{}, nil)

	snap := scope.Snapshot()
	count := func(key string) int64 {
		if c, ok := snap.Counters()[key]; ok {
			return c.Value()
		}
		return 0
	}
	require.EqualValues(t, 5, count("rpc_requests+operation="+poll))
	require.EqualValues(t, 1, count("long_poll_ends+kind=empty,operation="+poll))
	require.EqualValues(t, 1, count("long_poll_ends+kind=answered,operation="+poll))
	require.EqualValues(t, 2, count("long_poll_ends+kind=canceled,operation="+poll))
	require.EqualValues(t, 1, count("rpc_errors+code=PermissionDenied,operation="+poll))
	require.Zero(t, count("rpc_errors+code=Canceled,operation="+poll))
	require.Zero(t, count("rpc_errors+code=DeadlineExceeded,operation="+poll))
	require.EqualValues(t, 1, count("rpc_errors+code=NotFound,operation=RecordActivityTaskHeartbeat"))

	require.Nil(t, snap.Timers()["rpc_latency+operation="+poll], "a long poll's wait is not RPC latency")
	require.Len(t, snap.Timers()["long_poll_latency+operation="+poll].Values(), 5)
	require.Len(t, snap.Timers()["rpc_latency+operation=RecordActivityTaskHeartbeat"].Values(), 2)
}

// TestCanceledInsideTheServerIsUnavailable: a Canceled that the client did not ask for (history's
// router canceled the call's context inside the server, taking it back from a shard owner that
// stopped answering) reaches the client as Unavailable, which SDKs retry; a call its client
// canceled stays Canceled.
func TestCanceledInsideTheServerIsUnavailable(t *testing.T) {
	t.Parallel()

	intercept := errorInterceptor(zap.NewNop())
	info := &grpc.UnaryServerInfo{FullMethod: "/temporal.api.workflowservice.v1.WorkflowService/RecordWorkerHeartbeat"}
	call := func(ctx context.Context, err error) error {
		_, got := intercept(ctx, nil, info, func(context.Context, any) (any, error) { return nil, err })
		return got
	}
	for _, err := range []error{context.Canceled, serviceerror.NewCanceled("the caller went away"), status.Error(codes.Canceled, "context canceled")} {
		require.Equal(t, codes.Unavailable, status.Code(call(context.Background(), err)), "%v", err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, codes.Canceled, status.Code(call(canceled, context.Canceled)))
	require.Equal(t, codes.NotFound, status.Code(call(context.Background(), serviceerror.NewNotFound("gone"))))
}
