package history

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestConnForHostSendsTheClusterSecret: a stream to one host (as the live view's WatchChanges
// opens) carries the cluster secret; without it the host refuses the stream.
func TestConnForHostSendsTheClusterSecret(t *testing.T) {
	const secret = "cluster-secret-0123456789"
	srv := startHealthHost(t, health.NewServer(), WithClusterSecret(secret))
	watch := func(t *testing.T, opts ...RouterOption) error {
		r := NewRouter(4, fixedMembership(srv.Address()), opts...)
		t.Cleanup(func() { _ = r.Close() })
		conn, err := r.ConnForHost(srv.Address())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	}
	require.NoError(t, watch(t, WithRouterClusterSecret(secret)))
	require.Equal(t, codes.Unauthenticated, status.Code(watch(t)))
}
