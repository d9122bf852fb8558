package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// receiver is an in-process OTLP metrics receiver: it keeps the last point of every metric.
type receiver struct {
	colmetricspb.UnimplementedMetricsServiceServer
	mu      sync.Mutex
	metrics map[string]*metricspb.Metric
	service string
}

func newReceiver() *receiver { return &receiver{metrics: map[string]*metricspb.Metric{}} }

func (r *receiver) Export(_ context.Context, req *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	r.record(req)
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}

func (r *receiver) record(req *colmetricspb.ExportMetricsServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		for _, a := range rm.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				r.service = a.GetValue().GetStringValue()
			}
		}
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				r.metrics[m.GetName()] = m
			}
		}
	}
}

func (r *receiver) get(name string) *metricspb.Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.metrics[name]
}

// sumOf returns the value of the counter's point whose attributes are attrs (key=value).
func sumOf(m *metricspb.Metric, attrs map[string]string) (int64, bool) {
	for _, p := range m.GetSum().GetDataPoints() {
		if attrsMatch(p.GetAttributes(), attrs) {
			return p.GetAsInt(), true
		}
	}
	return 0, false
}

func attrsMatch(kvs []*commonpb.KeyValue, want map[string]string) bool {
	if len(kvs) != len(want) {
		return false
	}
	for _, kv := range kvs {
		if want[kv.GetKey()] != kv.GetValue().GetStringValue() {
			return false
		}
	}
	return true
}

func recordSome(t *testing.T, cfg OTLPConfig) {
	t.Helper()
	scope, _, closer, err := NewScope(Prefix, Config{OTLP: cfg}, WithReportInterval(time.Hour))
	require.NoError(t, err)
	WorkerHeartbeats.With(scope.SubScope("worker")).Inc(5)
	RPCLatency.With(scope, OperationTag("RecordWorkerHeartbeat")).Record(3 * time.Millisecond)
	WorkersByState.With(scope, StateTag("ACTIVE")).Update(2)
	GroupCommitBatchSize.With(scope).RecordValue(3)
	// Closing reports the last values and pushes a last export.
	require.NoError(t, closer.Close())
}

func checkReceived(t *testing.T, r *receiver) {
	t.Helper()
	require.Equal(t, "vigil", r.service)

	hb := r.get("vigil.worker_heartbeats")
	require.NotNil(t, hb, "metrics received: %v", r.metrics)
	require.Equal(t, WorkerHeartbeats.Help(), hb.GetDescription())
	require.True(t, hb.GetSum().GetIsMonotonic())
	v, ok := sumOf(hb, nil)
	require.True(t, ok)
	require.EqualValues(t, 5, v)

	// Fixed series are there at zero, as on /metrics.
	ends := r.get("vigil.long_poll_ends")
	require.NotNil(t, ends)
	v, ok = sumOf(ends, map[string]string{TagOperation: "PollActivityTaskQueue", TagKind: LongPollEmpty})
	require.True(t, ok)
	require.Zero(t, v)

	lat := r.get("vigil.rpc_latency")
	require.NotNil(t, lat)
	require.Equal(t, "s", lat.GetUnit())
	points := lat.GetHistogram().GetDataPoints()
	require.Len(t, points, 1)
	require.EqualValues(t, 1, points[0].GetCount())
	require.InDelta(t, 0.003, points[0].GetSum(), 1e-9)
	require.Equal(t, RPCLatency.Buckets(), points[0].GetExplicitBounds())

	g := r.get("vigil.workers_by_state")
	require.NotNil(t, g)
	found := false
	for _, p := range g.GetGauge().GetDataPoints() {
		if attrsMatch(p.GetAttributes(), map[string]string{TagState: "ACTIVE"}) {
			require.InDelta(t, 2, p.GetAsDouble(), 0)
			found = true
		}
	}
	require.True(t, found)

	batch := r.get("vigil.group_commit_batch_size")
	require.NotNil(t, batch)
	require.EqualValues(t, 1, batch.GetHistogram().GetDataPoints()[0].GetCount())
}

func TestOTLPExportOverGRPC(t *testing.T) {
	t.Parallel()

	r := newReceiver()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	colmetricspb.RegisterMetricsServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	recordSome(t, OTLPConfig{Endpoint: lis.Addr().String(), Insecure: true})
	checkReceived(t, r)
}

func TestOTLPExportOverHTTP(t *testing.T) {
	t.Parallel()

	r := newReceiver()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/metrics" {
			http.NotFound(w, req)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg colmetricspb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.record(&msg)
		out, _ := proto.Marshal(&colmetricspb.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	defer srv.Close()

	recordSome(t, OTLPConfig{Endpoint: srv.Listener.Addr().String(), Protocol: OTLPProtocolHTTP, Insecure: true})
	checkReceived(t, r)
}

func TestOTLPConfigRefusesAnUnknownProtocol(t *testing.T) {
	t.Parallel()

	_, _, _, err := NewScope(Prefix, Config{OTLP: OTLPConfig{Endpoint: "127.0.0.1:4317", Protocol: "carrier-pigeon"}})
	require.ErrorContains(t, err, "carrier-pigeon")
}
