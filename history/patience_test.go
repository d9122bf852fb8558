package history

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/common/admission"
)

// patienceProbe is a health server that records whether the last Check it served was patient.
type patienceProbe struct {
	*health.Server
	patient atomic.Bool
}

func (p *patienceProbe) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	p.patient.Store(admission.Patient(ctx))
	return p.Server.Check(ctx, req)
}

// A patient call (the Go SDK's heartbeat, marked by the frontend's tap) forwarded to the host
// that owns its shard stays patient there, so that host's admission lets it wait too; any
// other call arrives as it was.
func TestPatienceCrossesToTheShardOwner(t *testing.T) {
	probe := &patienceProbe{Server: health.NewServer()}
	srv := startHealthHost(t, probe)
	r := NewRouter(4, fixedMembership(srv.Address()))
	t.Cleanup(func() { _ = r.Close() })
	conn, err := r.ConnForShard(1)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err = healthpb.NewHealthClient(conn).Check(admission.WithPatience(ctx), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	require.True(t, probe.patient.Load(), "a patient call arrives patient")

	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	require.False(t, probe.patient.Load(), "any other call arrives as it was")
}
