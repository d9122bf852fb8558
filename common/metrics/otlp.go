package metrics

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.uber.org/zap"
)

// Config is where metrics go besides the Prometheus /metrics endpoint, which is always served.
type Config struct {
	// OTLP pushes the same metrics to an OpenTelemetry collector; off while Endpoint is empty.
	OTLP OTLPConfig `yaml:"otlp"`
}

// OTLP protocols.
const (
	OTLPProtocolGRPC = "grpc"
	OTLPProtocolHTTP = "http"
)

// OTLPIntervalDefault is how often metrics are pushed over OTLP.
const OTLPIntervalDefault = 10 * time.Second

// OTLPConfig configures the OTLP metrics exporter. The exporter also honours the standard
// OTEL_EXPORTER_OTLP_* environment variables for what is not set here (certificates,
// compression, timeout), and OTEL_RESOURCE_ATTRIBUTES.
type OTLPConfig struct {
	// Endpoint is the receiver's host:port (a collector: 4317 for gRPC, 4318 for HTTP).
	Endpoint string `yaml:"endpoint"`
	// Protocol is "grpc" (default) or "http" (HTTP/protobuf, path /v1/metrics).
	Protocol string `yaml:"protocol"`
	// Insecure sends without TLS.
	Insecure bool `yaml:"insecure"`
	// Interval between pushes (default OTLPIntervalDefault).
	Interval time.Duration `yaml:"interval"`
	// Headers are sent with every push, e.g. an API key for a hosted backend.
	Headers map[string]string `yaml:"headers"`
}

// Validate reports a protocol or interval that cannot work.
func (c OTLPConfig) Validate() error {
	switch strings.ToLower(c.Protocol) {
	case "", OTLPProtocolGRPC, OTLPProtocolHTTP:
	default:
		return fmt.Errorf("metrics.otlp.protocol %q: want %q or %q", c.Protocol, OTLPProtocolGRPC, OTLPProtocolHTTP)
	}
	if c.Interval < 0 {
		return fmt.Errorf("metrics.otlp.interval %s: must be positive", c.Interval)
	}
	return nil
}

// OTLPName is a definition's OpenTelemetry instrument name: vigil.<name>. Its unit is "s" for
// durations, so a collector's Prometheus exporter derives the same name as /metrics
// (vigil_<name>_total, vigil_<name>_seconds).
func OTLPName(d Definition) string { return Prefix + "." + d.Name() }

// otlpBridge is a tally reporter that records into OpenTelemetry instruments, exported over
// OTLP by a periodic reader. Counters become monotonic sums, gauges gauges, timers histograms in
// seconds with the definition's buckets. A tally value histogram reaches it as bucket counts,
// recorded at each bucket's upper bound: counts are exact, sums approximate.
type otlpBridge struct {
	provider *sdkmetric.MeterProvider
	meter    metric.Meter
	logger   *zap.Logger

	mu         sync.Mutex
	counters   map[string]metric.Int64Counter
	gauges     map[string]metric.Float64Gauge
	histograms map[string]metric.Float64Histogram
}

func newOTLPBridge(cfg OTLPConfig, logger *zap.Logger) (*otlpBridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx := context.Background()
	var exporter sdkmetric.Exporter
	var err error
	if strings.EqualFold(cfg.Protocol, OTLPProtocolHTTP) {
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(cfg.Endpoint)}
		if cfg.Insecure {
			opts = append(opts, otlpmetrichttp.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlpmetrichttp.WithHeaders(cfg.Headers))
		}
		exporter, err = otlpmetrichttp.New(ctx, opts...)
	} else {
		opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(cfg.Endpoint)}
		if cfg.Insecure {
			opts = append(opts, otlpmetricgrpc.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlpmetricgrpc.WithHeaders(cfg.Headers))
		}
		exporter, err = otlpmetricgrpc.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: OTLP exporter for %s: %w", cfg.Endpoint, err)
	}
	interval := cfg.Interval
	if interval <= 0 {
		interval = OTLPIntervalDefault
	}
	res, err := resource.New(ctx, resource.WithFromEnv(),
		resource.WithAttributes(attribute.String("service.name", Prefix)))
	if err != nil {
		return nil, fmt.Errorf("metrics: OTLP resource: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithInterval(interval))),
		sdkmetric.WithResource(res),
	)
	b := &otlpBridge{
		provider:   provider,
		meter:      provider.Meter("github.com/vigilhq/vigil"),
		logger:     logger,
		counters:   map[string]metric.Int64Counter{},
		gauges:     map[string]metric.Float64Gauge{},
		histograms: map[string]metric.Float64Histogram{},
	}
	for _, d := range Declared() {
		b.preregister(d)
	}
	return b, nil
}

// Close pushes a last export and stops the exporter.
func (b *otlpBridge) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.provider.Shutdown(ctx)
}

func (b *otlpBridge) preregister(d Definition) {
	combos := labelCombinations(d)
	name := Prefix + "_" + d.Name()
	switch d.Type() {
	case TypeCounter:
		c := b.counter(name)
		for _, values := range combos {
			c.Add(context.Background(), 0, metric.WithAttributeSet(attributes(d.Tags(), values)))
		}
	case TypeGauge:
		g := b.gauge(name)
		for _, values := range combos {
			g.Record(context.Background(), 0, metric.WithAttributeSet(attributes(d.Tags(), values)))
		}
	case TypeTimer, TypeHistogram:
		b.histogram(name)
	}
}

func attributes(keys, values []string) attribute.Set {
	kvs := make([]attribute.KeyValue, len(keys))
	for i, k := range keys {
		kvs[i] = attribute.String(k, values[i])
	}
	return attribute.NewSet(kvs...)
}

func tagAttributes(tags map[string]string) metric.MeasurementOption {
	kvs := make([]attribute.KeyValue, 0, len(tags))
	for k, v := range tags {
		kvs = append(kvs, attribute.String(k, v))
	}
	return metric.WithAttributeSet(attribute.NewSet(kvs...))
}

// instrumentOptions returns the OTel name, description and unit of a tally name (prefixed).
func instrumentInfo(name string) (otelName, help, unit string, buckets []float64) {
	d, ok := lookup(name)
	if !ok {
		return strings.Replace(name, "_", ".", 1), "", "", nil
	}
	unit = "1"
	if d.Seconds() {
		unit = "s"
	}
	return OTLPName(d), d.Help(), unit, d.Buckets()
}

func (b *otlpBridge) counter(name string) metric.Int64Counter {
	return instrument(b, b.counters, name, func(otelName, help, unit string, _ []float64) (metric.Int64Counter, error) {
		return b.meter.Int64Counter(otelName, metric.WithDescription(help), metric.WithUnit(unit))
	})
}

func (b *otlpBridge) gauge(name string) metric.Float64Gauge {
	return instrument(b, b.gauges, name, func(otelName, help, unit string, _ []float64) (metric.Float64Gauge, error) {
		return b.meter.Float64Gauge(otelName, metric.WithDescription(help), metric.WithUnit(unit))
	})
}

func (b *otlpBridge) histogram(name string) metric.Float64Histogram {
	return instrument(b, b.histograms, name, func(otelName, help, unit string, buckets []float64) (metric.Float64Histogram, error) {
		opts := []metric.Float64HistogramOption{metric.WithDescription(help), metric.WithUnit(unit)}
		if len(buckets) > 0 {
			opts = append(opts, metric.WithExplicitBucketBoundaries(buckets...))
		}
		return b.meter.Float64Histogram(otelName, opts...)
	})
}

// instrument returns the instrument of the tally name from cache, made by create on first use
// (a failure is logged, and what the meter answered is kept).
func instrument[T any](b *otlpBridge, cache map[string]T, name string, create func(otelName, help, unit string, buckets []float64) (T, error)) T {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i, ok := cache[name]; ok {
		return i
	}
	otelName, help, unit, buckets := instrumentInfo(name)
	i, err := create(otelName, help, unit, buckets)
	if err != nil {
		b.logger.Error("metrics: OTLP instrument", zap.String("metric", otelName), zap.Error(err))
	}
	cache[name] = i
	return i
}

func (b *otlpBridge) AllocateCounter(name string, tags map[string]string) tally.CachedCount {
	return otlpCounter{b.counter(name), tagAttributes(tags)}
}

func (b *otlpBridge) AllocateGauge(name string, tags map[string]string) tally.CachedGauge {
	return otlpGauge{b.gauge(name), tagAttributes(tags)}
}

func (b *otlpBridge) AllocateTimer(name string, tags map[string]string) tally.CachedTimer {
	return otlpHistogram{b.histogram(name), tagAttributes(tags)}
}

func (b *otlpBridge) AllocateHistogram(name string, tags map[string]string, _ tally.Buckets) tally.CachedHistogram {
	return otlpHistogram{b.histogram(name), tagAttributes(tags)}
}

func (b *otlpBridge) Capabilities() tally.Capabilities { return otlpCapabilities{} }

func (b *otlpBridge) Flush() {}

type otlpCapabilities struct{}

func (otlpCapabilities) Reporting() bool { return true }
func (otlpCapabilities) Tagging() bool   { return true }

type otlpCounter struct {
	c     metric.Int64Counter
	attrs metric.MeasurementOption
}

func (m otlpCounter) ReportCount(delta int64) {
	if delta > 0 {
		m.c.Add(context.Background(), delta, m.attrs)
	}
}

type otlpGauge struct {
	g     metric.Float64Gauge
	attrs metric.MeasurementOption
}

func (m otlpGauge) ReportGauge(v float64) { m.g.Record(context.Background(), v, m.attrs) }

type otlpHistogram struct {
	h     metric.Float64Histogram
	attrs metric.MeasurementOption
}

func (m otlpHistogram) ReportTimer(d time.Duration) {
	m.h.Record(context.Background(), d.Seconds(), m.attrs)
}

func (m otlpHistogram) ValueBucket(lower, upper float64) tally.CachedHistogramBucket {
	return otlpBucket{m, bucketValue(lower, upper)}
}

func (m otlpHistogram) DurationBucket(lower, upper time.Duration) tally.CachedHistogramBucket {
	if upper == time.Duration(math.MaxInt64) {
		return otlpBucket{m, math.Nextafter(lower.Seconds(), math.Inf(1))}
	}
	return otlpBucket{m, upper.Seconds()}
}

// bucketValue is the value recorded for a sample of bucket (lower, upper]: its upper bound,
// which falls in the same OTel bucket; the overflow bucket records just above its lower bound.
func bucketValue(lower, upper float64) float64 {
	if math.IsInf(upper, 1) || upper == math.MaxFloat64 {
		return math.Nextafter(lower, math.Inf(1))
	}
	return upper
}

type otlpBucket struct {
	m     otlpHistogram
	value float64
}

func (b otlpBucket) ReportSamples(n int64) {
	for range n {
		b.m.h.Record(context.Background(), b.value, b.m.attrs)
	}
}
