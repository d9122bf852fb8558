package metrics

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	"github.com/uber-go/tally/v4/multi"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.uber.org/zap"
)

// PrometheusReportIntervalDefault is how often tally pushes values into the Prometheus
// collectors (and the OTLP bridge's instruments). A scrape sees values at most this old;
// shorter costs CPU for nothing, as scrapes are typically 10-15s apart.
const PrometheusReportIntervalDefault = time.Second

// PrometheusOption changes NewPrometheusScope's and NewScope's defaults.
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
// (mount it at /metrics). Close the closer on shutdown to stop reporting. It is NewScope
// without OTLP.
func NewPrometheusScope(prefix string, opts ...PrometheusOption) (tally.Scope, http.Handler, io.Closer) {
	scope, handler, closer, err := NewScope(prefix, Config{}, opts...)
	if err != nil { // only the OTLP part can fail
		panic(err)
	}
	return scope, handler, closer
}

// NewScope returns a root scope for a server: its metrics are exposed in the Prometheus text
// format by the returned handler (mount it at /metrics) and, when cfg.OTLP.Endpoint is set,
// pushed to an OpenTelemetry collector over OTLP as well. Every declared metric (Declared) is
// registered at once, with its help text, and its fixed series at zero. Close the closer on
// shutdown: it stops reporting and pushes a last OTLP export.
//
// Names are flat: a sub-scope (scope.SubScope("worker")) adds nothing to a name, so a
// definition's name is its exported name whatever scope code records it on. Each scope has its
// own Prometheus registry (with Go runtime and process collectors), so two servers in one
// process, as in functional tests, do not collide.
func NewScope(prefix string, cfg Config, opts ...PrometheusOption) (tally.Scope, http.Handler, io.Closer, error) {
	o := prometheusOptions{interval: PrometheusReportIntervalDefault, logger: zap.NewNop()}
	for _, opt := range opts {
		opt(&o)
	}
	if prefix != Prefix {
		return nil, nil, nil, fmt.Errorf("metrics: prefix %q: every exported name starts with %q", prefix, Prefix)
	}

	registry := prom.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promReporter := newPromReporter(registry, o.logger)

	var reporter tally.CachedStatsReporter = promReporter
	var otlp *otlpBridge
	if cfg.OTLP.Endpoint != "" {
		var err error
		if otlp, err = newOTLPBridge(cfg.OTLP, o.logger); err != nil {
			return nil, nil, nil, err
		}
		reporter = multi.NewMultiCachedReporter(promReporter, otlp)
	}

	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		Prefix:                 prefix,
		CachedReporter:         reporter,
		Separator:              tallyprom.DefaultSeparator,
		SanitizeOptions:        &tallyprom.DefaultSanitizerOpts,
		OmitCardinalityMetrics: true,
	}, o.interval)

	handler := promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	return flatScope{scope}, handler, closerFunc(func() error {
		err := closer.Close() // flushes the last report into both reporters
		if otlp != nil {
			err = errors.Join(err, otlp.Close())
		}
		return err
	}), nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// flatScope ignores sub-scope names, so that a metric's exported name is its declared name
// (vigil_worker_heartbeats_total, not vigil_worker_worker_heartbeats_total). Tags still
// apply.
type flatScope struct{ tally.Scope }

func (s flatScope) SubScope(string) tally.Scope { return s }

func (s flatScope) Tagged(tags map[string]string) tally.Scope {
	return flatScope{s.Scope.Tagged(tags)}
}

var sanitizer = tally.NewSanitizer(tallyprom.DefaultSanitizerOpts)

// labelCombinations returns every combination of d's declared label values, in d's tag order,
// or nil when a tag's values are an open set.
func labelCombinations(d Definition) [][]string {
	combos := [][]string{{}}
	for _, k := range d.Tags() {
		values := d.Values(k)
		if len(values) == 0 {
			return nil
		}
		var next [][]string
		for _, c := range combos {
			for _, v := range values {
				next = append(next, append(slices.Clone(c), sanitizer.Value(v)))
			}
		}
		combos = next
	}
	return combos
}

// promReporter is tally's Prometheus reporter with vigil's conventions: names get their unit
// suffix, every declared metric is registered at start with its help and its fixed series,
// and each series carries exactly the declared labels.
type promReporter struct {
	inner  tallyprom.Reporter
	logger *zap.Logger

	mu       sync.Mutex
	mismatch map[string]bool // names already logged for undeclared labels
}

func newPromReporter(registry *prom.Registry, logger *zap.Logger) *promReporter {
	r := &promReporter{
		logger:   logger,
		mismatch: map[string]bool{},
		inner: tallyprom.NewReporter(tallyprom.Options{
			Registerer: registry,
			// Histograms aggregate across hosts; summaries (tally's default) do not.
			DefaultTimerType:        tallyprom.HistogramTimerType,
			DefaultHistogramBuckets: LatencyBuckets.AsValues(),
			// The reporter panics by default when one name is recorded with two different
			// label sets. That is a bug worth a log line, not worth taking the server down.
			OnRegisterError: func(err error) {
				logger.Error("metrics: registering a metric failed", zap.Error(err))
			},
		}),
	}
	for _, d := range Declared() {
		if err := r.preregister(d); err != nil {
			logger.Error("metrics: registering a metric failed", zap.String("metric", d.Name()), zap.Error(err))
		}
	}
	return r
}

func (r *promReporter) preregister(d Definition) error {
	name, tags, combos := d.ExportedName(), d.Tags(), labelCombinations(d)
	switch d.Type() {
	case TypeCounter:
		vec, err := r.inner.RegisterCounter(name, tags, d.Help())
		if err != nil {
			return err
		}
		for _, c := range combos {
			vec.WithLabelValues(c...)
		}
	case TypeGauge:
		vec, err := r.inner.RegisterGauge(name, tags, d.Help())
		if err != nil {
			return err
		}
		for _, c := range combos {
			vec.WithLabelValues(c...)
		}
	case TypeTimer, TypeHistogram:
		t, err := r.inner.RegisterTimer(name, tags, d.Help(), &tallyprom.RegisterTimerOptions{
			TimerType: tallyprom.HistogramTimerType, HistogramBuckets: d.Buckets(),
		})
		if err != nil {
			return err
		}
		for _, c := range combos {
			t.Histogram.WithLabelValues(c...)
		}
	}
	return nil
}

// declared returns the definition of a full (prefixed) name and tags projected onto its
// declared keys: a tag inherited from a scope but not declared is dropped, a declared tag not
// given is empty. A mismatch is logged once per name; it is a bug in the recording code.
func (r *promReporter) declared(name string, tags map[string]string) (Definition, map[string]string) {
	d, ok := lookup(name)
	if !ok {
		return nil, tags
	}
	if len(tags) == len(d.tags) {
		match := true
		for _, k := range d.tags {
			if _, ok := tags[k]; !ok {
				match = false
				break
			}
		}
		if match {
			return d, tags
		}
	}
	projected := make(map[string]string, len(d.tags))
	for _, k := range d.tags {
		projected[k] = tags[k]
	}
	r.mu.Lock()
	first := !r.mismatch[name]
	r.mismatch[name] = true
	r.mu.Unlock()
	if first {
		got := make([]string, 0, len(tags))
		for k := range tags {
			got = append(got, k)
		}
		sort.Strings(got)
		r.logger.Warn("metrics: a metric was recorded with other tags than declared; exporting the declared ones",
			zap.String("metric", name), zap.Strings("declared", d.tags), zap.Strings("recorded", got))
	}
	return d, projected
}

func (r *promReporter) AllocateCounter(name string, tags map[string]string) tally.CachedCount {
	d, tags := r.declared(name, tags)
	if d != nil {
		name = d.ExportedName()
	}
	return r.inner.AllocateCounter(name, tags)
}

func (r *promReporter) AllocateGauge(name string, tags map[string]string) tally.CachedGauge {
	d, tags := r.declared(name, tags)
	if d != nil {
		name = d.ExportedName()
	}
	return r.inner.AllocateGauge(name, tags)
}

func (r *promReporter) AllocateTimer(name string, tags map[string]string) tally.CachedTimer {
	d, tags := r.declared(name, tags)
	if d != nil {
		name = d.ExportedName()
	}
	return r.inner.AllocateTimer(name, tags)
}

func (r *promReporter) AllocateHistogram(name string, tags map[string]string, buckets tally.Buckets) tally.CachedHistogram {
	d, tags := r.declared(name, tags)
	if d != nil {
		name = d.ExportedName()
	}
	return r.inner.AllocateHistogram(name, tags, buckets)
}

func (r *promReporter) Capabilities() tally.Capabilities { return r.inner.Capabilities() }

func (r *promReporter) Flush() { r.inner.Flush() }
