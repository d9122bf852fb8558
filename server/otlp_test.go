package server

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/common/metrics"
)

type otlpReceiver struct {
	colmetricspb.UnimplementedMetricsServiceServer
	mu     sync.Mutex
	gauges map[string]float64
}

func (r *otlpReceiver) Export(_ context.Context, req *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				for _, p := range m.GetGauge().GetDataPoints() {
					r.gauges[m.GetName()] = p.GetAsDouble()
				}
			}
		}
	}
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}

func (r *otlpReceiver) gauge(name string) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.gauges[name]
	return v, ok
}

// TestServerPushesMetricsOverOTLP: with metrics.otlp set, a server pushes its metrics to the
// collector as well: here the number of shards it owns.
func TestServerPushesMetricsOverOTLP(t *testing.T) {
	r := &otlpReceiver{gauges: map[string]float64{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	collector := grpc.NewServer()
	colmetricspb.RegisterMetricsServiceServer(collector, r)
	go func() { _ = collector.Serve(lis) }()
	defer collector.Stop()

	cfg := testConfig(t, filepath.Join(t.TempDir(), "vigil.db"))
	cfg.Metrics.OTLP = metrics.OTLPConfig{Endpoint: lis.Addr().String(), Insecure: true, Interval: 100 * time.Millisecond}
	srv, err := newTestServer(t, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, srv.Start(ctx))
	defer func() { require.NoError(t, srv.Stop(ctx)) }()

	require.Eventually(t, func() bool {
		v, ok := r.gauge(metrics.OTLPName(metrics.ShardsOwned))
		return ok && v == float64(cfg.History.NumShards)
	}, 30*time.Second, 50*time.Millisecond, "the collector never received shards_owned = %d", cfg.History.NumShards)
}
