package history

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

type fixedMembership string

func (m fixedMembership) HostForShard(int32) (string, error) { return string(m), nil }

// startHealthHost starts a history gRPC server on a free port with hs as its only service,
// stopped when the test ends.
func startHealthHost(t *testing.T, hs healthpb.HealthServer, opts ...ServerOption) *Server {
	t.Helper()
	srv, err := NewServer("127.0.0.1:0", []ServiceRegistration{func(r grpc.ServiceRegistrar) {
		healthpb.RegisterHealthServer(r, hs)
	}}, zap.NewNop(), opts...)
	require.NoError(t, err)
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Stop(ctx)
	})
	return srv
}

func TestClusterSecret(t *testing.T) {
	const secret = "cluster-secret-0123456789"
	srv := startHealthHost(t, health.NewServer(), WithClusterSecret(secret))
	check := func(t *testing.T, opts ...RouterOption) error {
		r := NewRouter(4, fixedMembership(srv.Address()), opts...)
		t.Cleanup(func() { _ = r.Close() })
		conn, err := r.ConnForShard(1)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	t.Run("SameSecretServed", func(t *testing.T) {
		require.NoError(t, check(t, WithRouterClusterSecret(secret)))
	})
	t.Run("NoSecretRefused", func(t *testing.T) {
		require.Equal(t, codes.Unauthenticated, status.Code(check(t)))
	})
	t.Run("WrongSecretRefused", func(t *testing.T) {
		require.Equal(t, codes.Unauthenticated, status.Code(check(t, WithRouterClusterSecret("another-secret-0123456789"))))
	})
}
