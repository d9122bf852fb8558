package metrics

import (
	"io"
	"net/http"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.uber.org/zap"
)

// PrometheusReportIntervalDefault is how often tally pushes values into the Prometheus
// collectors. A scrape sees values at most this old; shorter costs CPU for nothing, as scrapes
// are typically 10-15s apart.
const PrometheusReportIntervalDefault = time.Second

// PrometheusOption changes NewPrometheusScope's defaults.
type PrometheusOption func(*prometheusOptions)

type prometheusOptions struct {
	interval time.Duration
	logger   *zap.Logger
}

// WithReportInterval sets the report interval (default PrometheusReportIntervalDefault).
func WithReportInterval(d time.Duration) PrometheusOption {
	return func(o *prometheusOptions) {
		if d > 0 {
			o.interval = d
		}
	}
}

// WithLogger sets where metric registration errors are logged. Without it they are dropped.
func WithLogger(logger *zap.Logger) PrometheusOption {
	return func(o *prometheusOptions) {
		if logger != nil {
			o.logger = logger
		}
	}
}

// NewPrometheusScope returns a root scope whose metrics are exposed by the returned handler
// (mount it at /metrics), named prefix_name. Close the closer on shutdown to stop reporting.
//
// Each scope has its own registry (with Go runtime and process collectors), so two servers in
// one process, as in functional tests, do not collide.
func NewPrometheusScope(prefix string, opts ...PrometheusOption) (tally.Scope, http.Handler, io.Closer) {
	o := prometheusOptions{interval: PrometheusReportIntervalDefault, logger: zap.NewNop()}
	for _, opt := range opts {
		opt(&o)
	}

	registry := prom.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer: registry,
		// Histograms aggregate across hosts; summaries (tally's default) do not.
		DefaultTimerType:        tallyprom.HistogramTimerType,
		DefaultHistogramBuckets: LatencyBuckets.AsValues(),
		// The reporter panics by default when one name is recorded with two different label
		// sets. That is a bug worth a log line, not worth taking the server down.
		OnRegisterError: func(err error) {
			o.logger.Error("metrics: registering a metric failed", zap.Error(err))
		},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		Prefix:                 prefix,
		CachedReporter:         reporter,
		Separator:              tallyprom.DefaultSeparator,
		SanitizeOptions:        &tallyprom.DefaultSanitizerOpts,
		OmitCardinalityMetrics: true,
	}, o.interval)

	handler := promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	return scope, handler, closer
}
