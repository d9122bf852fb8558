package frontend

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

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
}
