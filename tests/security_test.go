package tests

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminpb "github.com/vigilhq/vigil/api/gen/adminpb/v1"
	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/tests/testcluster"
)

const testAdminKey = "admin-key-for-tests-0123456789"

// secureCluster starts a cluster with TLS (certificate for 127.0.0.1 from a fresh CA) and auth,
// with testAdminKey as its static admin key.
func secureCluster(t *testing.T, tlsPerms map[string][]string, requireClientCert bool) (*testcluster.Cluster, *testCA, string) {
	t.Helper()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	certPath, keyPath := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	ca.issue(t, "vigil", 100, true, certPath, keyPath)
	c := testcluster.New(t, testcluster.Options{
		Namespaces: []string{"other"},
		Auth:       auth.Config{Enabled: true, AdminAPIKey: testAdminKey, TLSPermissions: tlsPerms},
		TLS:        auth.TLSConfig{CertFile: certPath, KeyFile: keyPath, ClientCAFile: ca.pemPath, RequireClientCert: requireClientCert},
	})
	return c, ca, certPath
}

func runGreeting(t *testing.T, c client.Client, taskQueue, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := c.ExecuteActivity(ctx, client.StartActivityOptions{ID: id, TaskQueue: taskQueue, StartToCloseTimeout: time.Minute}, "greet", id)
	require.NoError(t, err)
	var out string
	require.NoError(t, h.Get(ctx, &out))
	return out
}

func startGreeter(t *testing.T, c client.Client, taskQueue string) {
	t.Helper()
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
	w.RegisterActivityWithOptions(func(_ context.Context, name string) (string, error) { return "hello " + name, nil },
		activity.RegisterOptions{Name: "greet"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

func TestSecurity_SDKOverTLSWithAPIKey(t *testing.T) {
	cluster, ca, _ := secureCluster(t, nil, false)
	admin := dialTLS(t, cluster.Address(), &tls.Config{RootCAs: ca.pool}, testAdminKey)
	key, _ := createAPIKey(t, admin, "default", "worker,writer")

	c, err := client.Dial(client.Options{
		HostPort:                cluster.Address(),
		Credentials:             client.NewAPIKeyStaticCredentials(key),
		ConnectionOptions:       client.ConnectionOptions{TLS: &tls.Config{RootCAs: ca.pool}},
		WorkerHeartbeatInterval: time.Second,
		Logger:                  quietLogger{},
	})
	require.NoError(t, err)
	defer c.Close()
	startGreeter(t, c, "secure-tq")
	require.Equal(t, "hello a1", runGreeting(t, c, "secure-tq", "a1"))

	// The worker's heartbeats were accepted: it is ACTIVE.
	reader, _ := createAPIKey(t, admin, "default", "reader")
	live := livenesspb.NewWorkerLivenessServiceClient(dialTLS(t, cluster.Address(), &tls.Config{RootCAs: ca.pool}, reader))
	require.Eventually(t, func() bool {
		resp, err := live.ListWorkerLiveness(context.Background(), &livenesspb.ListWorkerLivenessRequest{Namespace: "default"})
		return err == nil && len(resp.GetWorkers()) == 1 && resp.GetWorkers()[0].GetState() == livenesspb.LivenessState_LIVENESS_STATE_ACTIVE
	}, 20*time.Second, 50*time.Millisecond)

	t.Run("PlaintextRefused", func(t *testing.T) {
		plain := dialLiveness(t, cluster.Address())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := plain.ListWorkerLiveness(ctx, &livenesspb.ListWorkerLivenessRequest{Namespace: "default"})
		require.Equal(t, codes.Unavailable, status.Code(err), "a plaintext client cannot talk to a TLS port: %v", err)
	})
	t.Run("RevokedKeyRefusedAtOnce", func(t *testing.T) {
		k, id := createAPIKey(t, admin, "default", "reader")
		kc := livenesspb.NewWorkerLivenessServiceClient(dialTLS(t, cluster.Address(), &tls.Config{RootCAs: ca.pool}, k))
		_, err := kc.ListWorkerLiveness(context.Background(), &livenesspb.ListWorkerLivenessRequest{Namespace: "default"})
		require.NoError(t, err)
		_, err = adminpb.NewAdminServiceClient(admin).RevokeAPIKey(context.Background(), &adminpb.RevokeAPIKeyRequest{Id: id})
		require.NoError(t, err)
		_, err = kc.ListWorkerLiveness(context.Background(), &livenesspb.ListWorkerLivenessRequest{Namespace: "default"})
		require.Equal(t, codes.Unauthenticated, status.Code(err))
		require.Contains(t, status.Convert(err).Message(), "revoked")
	})
}

func TestSecurity_MTLSWithCertificateRotation(t *testing.T) {
	cluster, ca, certPath := secureCluster(t, map[string][]string{"fleet-a": {"default:worker,writer"}}, true)
	clientPair := ca.issue(t, "fleet-a", 200, false, "", "")
	clientTLS := &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{clientPair}}
	c, err := client.Dial(client.Options{
		HostPort:                cluster.Address(),
		ConnectionOptions:       client.ConnectionOptions{TLS: clientTLS},
		WorkerHeartbeatInterval: time.Second,
		Logger:                  quietLogger{},
	})
	require.NoError(t, err)
	defer c.Close()
	startGreeter(t, c, "mtls-tq")
	require.Equal(t, "hello m1", runGreeting(t, c, "mtls-tq", "m1"))

	t.Run("NoClientCertificateRefused", func(t *testing.T) {
		conn := dialTLS(t, cluster.Address(), &tls.Config{RootCAs: ca.pool}, "")
		_, err := livenesspb.NewWorkerLivenessServiceClient(conn).ListWorkerLiveness(context.Background(), &livenesspb.ListWorkerLivenessRequest{Namespace: "default"})
		require.Error(t, err)
	})
	t.Run("UnmappedCertificateMayDoNothing", func(t *testing.T) {
		other := ca.issue(t, "stranger", 201, false, "", "")
		conn := dialTLS(t, cluster.Address(), &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{other}}, "")
		_, err := livenesspb.NewWorkerLivenessServiceClient(conn).ListWorkerLiveness(context.Background(), &livenesspb.ListWorkerLivenessRequest{Namespace: "default"})
		require.Equal(t, codes.PermissionDenied, status.Code(err))
		require.Contains(t, status.Convert(err).Message(), "mtls:stranger")
	})

	// Rotate the server certificate while the worker runs: new connections get the new one,
	// the worker carries on.
	ca.issue(t, "vigil", 101, true, certPath, filepath.Join(filepath.Dir(certPath), "server-key.pem"))
	require.Eventually(t, func() bool {
		conn, err := tls.Dial("tcp", cluster.Address(), &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{clientPair}, NextProtos: []string{"h2"}})
		if err != nil {
			return false
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64() == 101
	}, 20*time.Second, 100*time.Millisecond, "the rotated certificate is served without a restart")
	require.Equal(t, "hello m2", runGreeting(t, c, "mtls-tq", "m2"))
}
