package frontend

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestHealthService: grpc.health.v1.Health on the frontend port says NOT_SERVING while the
// server starts, SERVING once it is ready, NOT_SERVING when it stops; a watch hears each.
func TestHealthService(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	server, err := NewServer(ServerConfig{Address: "127.0.0.1:0"}, env.deps, env.workflow, env.liveness)
	require.NoError(t, err)
	server.Serve()
	conn, err := grpc.NewClient(server.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		require.NoError(t, err)
		return resp.GetStatus()
	}
	workflowService := workflowservice.WorkflowService_ServiceDesc.ServiceName

	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, check(""), "starting")
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, check(workflowService), "starting")
	watchCtx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	watch, err := client.Watch(watchCtx, &healthpb.HealthCheckRequest{Service: workflowService})
	require.NoError(t, err)
	first, err := watch.Recv()
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, first.GetStatus())

	server.Start()
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, check(""))
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, check(workflowService))
	for _, name := range HealthServices {
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, check(name), name)
	}
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	next, err := watch.Recv()
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, next.GetStatus())

	// Stop does not wait for the open watch (it would never end by itself): no deadline here,
	// so a Stop held by it hangs the test.
	server.Stop(ctx)
	for {
		resp, err := watch.Recv()
		if err != nil {
			break // the watch ended with the server
		}
		require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, resp.GetStatus())
	}
}
