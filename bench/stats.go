package bench

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc/status"
)

// Latencies are recorded in microseconds from 1 µs to 5 minutes with three significant
// digits: beyond that a heartbeat has long failed on its deadline.
const (
	histogramMinMicros = 1
	histogramMaxMicros = int64(5 * time.Minute / time.Microsecond)
	histogramSigFigs   = 3
)

// latencyRecorder is a histogram shared by every client goroutine.
type latencyRecorder struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

func newLatencyRecorder() *latencyRecorder {
	return &latencyRecorder{h: hdrhistogram.New(histogramMinMicros, histogramMaxMicros, histogramSigFigs)}
}

func (r *latencyRecorder) record(d time.Duration) {
	us := min(max(d.Microseconds(), histogramMinMicros), histogramMaxMicros)
	r.mu.Lock()
	_ = r.h.RecordValue(us)
	r.mu.Unlock()
}

type latencySnapshot struct {
	count                         int64
	p50, p90, p95, p99, p999, max float64
	mean                          float64
}

func (r *latencyRecorder) snapshot() latencySnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := func(v int64) float64 { return float64(v) / 1000 }
	return latencySnapshot{
		count: r.h.TotalCount(),
		p50:   ms(r.h.ValueAtQuantile(50)),
		p90:   ms(r.h.ValueAtQuantile(90)),
		p95:   ms(r.h.ValueAtQuantile(95)),
		p99:   ms(r.h.ValueAtQuantile(99)),
		p999:  ms(r.h.ValueAtQuantile(99.9)),
		max:   ms(r.h.Max()),
		mean:  r.h.Mean() / 1000,
	}
}

// counters are the run's tallies. Heartbeat counts are in worker heartbeats (a public-API
// request of G workers counts G); RPC counts are in requests.
type counters struct {
	offered   atomic.Int64 // heartbeat slots that came due
	missed    atomic.Int64 // slots skipped because the previous RPC of the client was still running
	sent      atomic.Int64
	ok        atomic.Int64
	failed    atomic.Int64
	rpcs      atomic.Int64
	rpcErrors atomic.Int64
	retried   atomic.Int64 // RPCs answered after at least one retry (Unavailable or ResourceExhausted)
	retries   atomic.Int64 // the retried Unavailable answers
	// retriesRefused are the retried ResourceExhausted answers.
	retriesRefused atomic.Int64
	// answeredOK counts every worker heartbeat answered OK, when it was answered, warm-up and
	// the burst's included, and registeredOK the registrations among them (a worker key's
	// first OK): the server's CPU per heartbeat is read against them (cost.go).
	answeredOK   atomic.Int64
	registeredOK atomic.Int64

	churned        atomic.Int64 // clients restarted with fresh keys
	shutdowns      atomic.Int64 // ShutdownWorker calls
	shutdownErrors atomic.Int64

	mu     sync.Mutex
	byCode map[string]int64 // failed heartbeat RPCs by gRPC code
	// firstByCode is the message of the first failure of each code: what a run's 5,000
	// Unavailable at once (a connection closed) says about who closed it and why.
	firstByCode map[string]string
}

func (c *counters) countError(err error) {
	code := status.Code(err).String()
	c.mu.Lock()
	if c.byCode == nil {
		c.byCode = make(map[string]int64)
		c.firstByCode = make(map[string]string)
	}
	c.byCode[code]++
	if _, ok := c.firstByCode[code]; !ok {
		c.firstByCode[code] = status.Convert(err).Message()
	}
	c.mu.Unlock()
}

func (c *counters) firstErrors() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.firstByCode)
}

func (c *counters) errorsByCode() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byCode)
}

// checkLoopback refuses any address off this machine: the generator is a load, and a load
// pointed at somebody else's server by a typo is an incident.
func checkLoopback(hostPort string) error {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return fmt.Errorf("address %q: %w", hostPort, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q: only loopback addresses (127.0.0.1) may be loaded", hostPort)
	}
	return nil
}

func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("metrics url %q: %w", raw, err)
	}
	if u.Scheme != "http" {
		return fmt.Errorf("metrics url %q: want http://127.0.0.1:PORT/metrics", raw)
	}
	hostPort := u.Host
	if u.Port() == "" {
		hostPort = net.JoinHostPort(u.Hostname(), "80")
	}
	return checkLoopback(hostPort)
}
