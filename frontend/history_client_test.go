package frontend

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// fakeHistory answers every worker RPC; routing is what is under test.
type fakeHistory struct {
	workerpb.UnimplementedWorkerHistoryServiceServer
}

func (fakeHistory) RecordHeartbeats(_ context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
	return okResults(req), nil
}

func (fakeHistory) ShutdownWorker(context.Context, *workerpb.ShutdownWorkerRequest) (*workerpb.ShutdownWorkerResponse, error) {
	return &workerpb.ShutdownWorkerResponse{}, nil
}

func (fakeHistory) DrainWorker(context.Context, *workerpb.DrainWorkerRequest) (*workerpb.DrainWorkerResponse, error) {
	return &workerpb.DrainWorkerResponse{}, nil
}

func (fakeHistory) DescribeWorker(context.Context, *workerpb.DescribeWorkerRequest) (*workerpb.DescribeWorkerResponse, error) {
	return &workerpb.DescribeWorkerResponse{}, nil
}

func (fakeHistory) ListWorkers(context.Context, *workerpb.ListWorkersRequest) (*workerpb.ListWorkersResponse, error) {
	return &workerpb.ListWorkersResponse{}, nil
}

// fakeActivityHistory answers every activity RPC with an empty response.
type fakeActivityHistory struct {
	activitypb.UnimplementedActivityHistoryServiceServer
}

func (fakeActivityHistory) StartActivity(context.Context, *activitypb.StartActivityRequest) (*activitypb.StartActivityResponse, error) {
	return &activitypb.StartActivityResponse{}, nil
}

func (fakeActivityHistory) RecordActivityTaskStarted(context.Context, *activitypb.RecordActivityTaskStartedRequest) (*activitypb.RecordActivityTaskStartedResponse, error) {
	return &activitypb.RecordActivityTaskStartedResponse{}, nil
}

func (fakeActivityHistory) RespondActivityTaskCompleted(context.Context, *activitypb.RespondActivityTaskCompletedRequest) (*activitypb.RespondActivityTaskCompletedResponse, error) {
	return &activitypb.RespondActivityTaskCompletedResponse{}, nil
}

func (fakeActivityHistory) RespondActivityTaskFailed(context.Context, *activitypb.RespondActivityTaskFailedRequest) (*activitypb.RespondActivityTaskFailedResponse, error) {
	return &activitypb.RespondActivityTaskFailedResponse{}, nil
}

func (fakeActivityHistory) RespondActivityTaskCanceled(context.Context, *activitypb.RespondActivityTaskCanceledRequest) (*activitypb.RespondActivityTaskCanceledResponse, error) {
	return &activitypb.RespondActivityTaskCanceledResponse{}, nil
}

func (fakeActivityHistory) RecordActivityTaskHeartbeat(context.Context, *activitypb.RecordActivityTaskHeartbeatRequest) (*activitypb.RecordActivityTaskHeartbeatResponse, error) {
	return &activitypb.RecordActivityTaskHeartbeatResponse{}, nil
}

func (fakeActivityHistory) PollActivityExecution(context.Context, *activitypb.PollActivityExecutionRequest) (*activitypb.PollActivityExecutionResponse, error) {
	return &activitypb.PollActivityExecutionResponse{}, nil
}

func (fakeActivityHistory) DescribeActivity(context.Context, *activitypb.DescribeActivityRequest) (*activitypb.DescribeActivityResponse, error) {
	return &activitypb.DescribeActivityResponse{}, nil
}

func (fakeActivityHistory) RequestCancelActivity(context.Context, *activitypb.RequestCancelActivityRequest) (*activitypb.RequestCancelActivityResponse, error) {
	return &activitypb.RequestCancelActivityResponse{}, nil
}

type recordingRouter struct {
	conn grpc.ClientConnInterface
	mu   sync.Mutex
	// shards asked for, in order.
	shards []int32
}

func (r *recordingRouter) ShardFor(_, businessID string) int32 { return shardOfKey(businessID) }

func (r *recordingRouter) ConnForShard(shardID int32) (grpc.ClientConnInterface, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shards = append(r.shards, shardID)
	return r.conn, nil
}

func TestRoutedHistoryClient(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	server := grpc.NewServer()
	workerpb.RegisterWorkerHistoryServiceServer(server, fakeHistory{})
	activitypb.RegisterActivityHistoryServiceServer(server, fakeActivityHistory{})
	go func() { _ = server.Serve(lis) }()
	t.Cleanup(server.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	router := &recordingRouter{conn: conn}
	history := NewHistoryClient(router)
	ctx := context.Background()
	require.Equal(t, int32(4), history.ShardFor("ns", "w-4"))
	_, err = history.RecordHeartbeats(ctx, &workerpb.RecordHeartbeatsRequest{ShardId: 3})
	require.NoError(t, err)
	_, err = history.ShutdownWorker(ctx, &workerpb.ShutdownWorkerRequest{WorkerInstanceKey: "w-5"})
	require.NoError(t, err)
	_, err = history.DrainWorker(ctx, &workerpb.DrainWorkerRequest{WorkerInstanceKey: "w-6"})
	require.NoError(t, err)
	_, err = history.DescribeWorker(ctx, &workerpb.DescribeWorkerRequest{WorkerInstanceKey: "w-7"})
	require.NoError(t, err)
	_, err = history.ListWorkers(ctx, &workerpb.ListWorkersRequest{})
	require.NoError(t, err)
	require.Equal(t, []int32{3, 5, 6, 7, listShard}, router.shards)

	// Activity calls go to the shard of their activity ID, named or inside the task token.
	router.shards = nil
	token := taskToken(t, "ns", "a-9", 1)
	_, err = history.StartActivity(ctx, &activitypb.StartActivityRequest{NamespaceId: "ns", ActivityId: "a-1"})
	require.NoError(t, err)
	_, err = history.RecordActivityTaskStarted(ctx, &activitypb.RecordActivityTaskStartedRequest{NamespaceId: "ns", ActivityId: "a-2"})
	require.NoError(t, err)
	_, err = history.PollActivityExecution(ctx, &activitypb.PollActivityExecutionRequest{NamespaceId: "ns", ActivityId: "a-3"})
	require.NoError(t, err)
	_, err = history.DescribeActivity(ctx, &activitypb.DescribeActivityRequest{NamespaceId: "ns", ActivityId: "a-4"})
	require.NoError(t, err)
	_, err = history.RequestCancelActivity(ctx, &activitypb.RequestCancelActivityRequest{NamespaceId: "ns", ActivityId: "a-5"})
	require.NoError(t, err)
	_, err = history.RespondActivityTaskCompleted(ctx, &activitypb.RespondActivityTaskCompletedRequest{NamespaceId: "ns", TaskToken: token})
	require.NoError(t, err)
	_, err = history.RespondActivityTaskFailed(ctx, &activitypb.RespondActivityTaskFailedRequest{NamespaceId: "ns", TaskToken: token})
	require.NoError(t, err)
	_, err = history.RespondActivityTaskCanceled(ctx, &activitypb.RespondActivityTaskCanceledRequest{NamespaceId: "ns", TaskToken: token})
	require.NoError(t, err)
	_, err = history.RecordActivityTaskHeartbeat(ctx, &activitypb.RecordActivityTaskHeartbeatRequest{NamespaceId: "ns", TaskToken: token})
	require.NoError(t, err)
	require.Equal(t, []int32{1, 2, 3, 4, 5, 9, 9, 9, 9}, router.shards)

	_, err = history.RecordActivityTaskHeartbeat(ctx, &activitypb.RecordActivityTaskHeartbeatRequest{NamespaceId: "ns", TaskToken: []byte("junk")})
	requireCode(t, codes.InvalidArgument, err)
}
