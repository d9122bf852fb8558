// Package bench drives a running vigil server the way a fleet of SDK workers does: many
// workers heartbeating on their own jittered schedules, some of them restarting (churn), some
// dying without a word (kill), and measures what the fleet and its operator would see:
// heartbeat latency and throughput, errors by gRPC code, how long the server takes to declare
// a dead worker INACTIVE and to hand its activities back.
package bench

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vigilhq/vigil/frontend"
)

// API names the heartbeat path the simulated workers use.
type API string

const (
	// APIPublic sends Temporal's WorkflowService.RecordWorkerHeartbeat, one request per
	// simulated client carrying the heartbeats of its workers, as the Go SDK does.
	APIPublic API = "public"
	// APILiveness sends vigil's WorkerLivenessService.RecordHeartbeat, one request per worker,
	// with a requested lease and activity binding deltas.
	APILiveness API = "liveness"
)

// Defaults of a Config field left at its zero value.
const (
	AddressDefault          = "127.0.0.1:7233"
	NamespaceDefault        = "default"
	WorkersDefault          = 100
	IntervalDefault         = 10 * time.Second
	DurationDefault         = 60 * time.Second
	ConnectionsDefault      = 4
	WorkersPerClientDefault = 1
	// JitterDefault spreads each worker's heartbeats ±10% around the interval, as SDK timers
	// drift, so that workers started together do not stay in lockstep.
	JitterDefault = 0.1
	// PollIntervalDefault is how often a killed worker past its lease deadline is described
	// again; it is the resolution of the observed detection time.
	PollIntervalDefault = 100 * time.Millisecond
	// RPCTimeoutDefault bounds one RPC of the generator.
	RPCTimeoutDefault = 10 * time.Second
	// AlternatePeriodDefault is the length of one phase of an alternating run.
	AlternatePeriodDefault = 40 * time.Second
	// TaskQueuesDefault is how many task queue names the workers are spread over.
	TaskQueuesDefault = 10
	// maxPollersInFlight bounds the DescribeWorkerLiveness calls of the kill watcher, so that
	// watching a hundred dead workers does not become a load of its own.
	maxPollersInFlight = 16
)

// Config describes one run. Zero values take the defaults above.
type Config struct {
	// Address of the vigil frontend; only loopback addresses are accepted. Several
	// comma-separated addresses (the hosts of a cluster) are used round robin, a host that
	// does not answer being left out until it is back, as behind a load balancer.
	Address   string
	Namespace string
	// Workers is the number of simulated workers alive at any time.
	Workers int
	// Interval between two heartbeats of a worker; each wait is jittered by ±Jitter.
	Interval time.Duration
	Jitter   float64
	// Duration of the load. With Kill, the load goes on after Duration until the killed
	// workers are detected and their activities handed back (or RecoveryTimeout passes).
	Duration time.Duration
	// Warmup is excluded from the figures: heartbeats sent (and slots due) before it has
	// passed are not counted, so a fleet's first registrations do not weigh on its steady
	// state. Churn, kill and shutdown behave the same either way.
	Warmup time.Duration
	// Activities bound per worker on its first heartbeat (liveness API only).
	Activities int
	// Churn is the percentage of workers that shut down (ShutdownWorker) and are replaced by
	// a fresh worker instance key every ChurnPeriod (default Interval).
	Churn       float64
	ChurnPeriod time.Duration
	// Kill workers stop heartbeating at once, without ShutdownWorker, in the middle of the run.
	Kill int
	// Lease requested by liveness-API heartbeats; zero lets the server decide.
	Lease time.Duration
	API   API
	// WorkersPerClient groups workers into one RecordWorkerHeartbeat request (public API).
	WorkersPerClient int
	// Connections is the number of gRPC connections the clients are spread over.
	Connections int
	// ServerPID, when set, is sampled from /proc for RSS and CPU during the run, and its CPU
	// time per heartbeat is read over the steady window (cost.go).
	ServerPID int
	// StorePID, with ServerPID, is the store's process (a PostgreSQL server's postmaster):
	// its CPU and its children's is read with the server's, over the same steady window.
	StorePID int
	// CPUWindow is the length of the steady window over which the server's CPU per heartbeat
	// is read, from the end of Warmup; zero means until the load ends, or until the
	// registration burst.
	CPUWindow time.Duration
	// MetricsURL, when set (http://127.0.0.1:7243/metrics), is read after the killed workers
	// are INACTIVE to wait until the server's outbound backlog (the reschedule batches still
	// to deliver) is empty.
	MetricsURL string
	// PollInterval of the kill watcher.
	PollInterval time.Duration
	// RecoveryTimeout bounds how long the run waits for the killed workers' detection and
	// hand-back; zero means 2 minutes plus three leases.
	RecoveryTimeout time.Duration
	RPCTimeout      time.Duration
	// RetryUnavailable retries a heartbeat that failed with Unavailable (backoff 10 ms to
	// 200 ms, within RPCTimeout), as the SDK does; its latency then runs from the first
	// attempt to the answer. Off: an Unavailable is counted as an error at once.
	RetryUnavailable bool
	// RetryResourceExhausted retries a heartbeat refused with ResourceExhausted (the server is
	// behind) as the SDK does: backoff from 200 ms, doubling up to a tenth of RPCTimeout,
	// within RPCTimeout. Off: a refusal is counted as an error at once.
	RetryResourceExhausted bool
	// Observe, when set, is called after every heartbeat RPC (warm-up included) with when it
	// was sent, how long it took to its answer (retries included), how many retries it
	// needed and its final error. It runs on the client's goroutine: keep it short.
	Observe func(sent time.Time, took time.Duration, retries int, err error)
	// ObserveWorkers, when set, is called after every heartbeat RPC as Observe is, with the
	// instance keys of the workers the RPC carried: a client-side history of each worker's
	// heartbeats (invoked at sent, answered at sent+took), for checks such as
	// linearizability.
	ObserveWorkers func(keys []string, sent time.Time, took time.Duration, err error)
	// ShutdownAtEnd sends ShutdownWorker for every live worker when the load ends, as an SDK
	// fleet stopping cleanly does; otherwise the workers are left to expire.
	ShutdownAtEnd bool
	// RegisterBurst new workers send their first heartbeat at the same instant,
	// RegisterBurstAt after the start, while the fleet of Workers heartbeats on; then they
	// heartbeat on like the others. A refused registration (ResourceExhausted, or any other
	// error) is retried with backoff until it is answered OK. Their heartbeats are left out of
	// the fleet's figures; the summary's Burst tells how long they took to all be registered
	// and what the fleet's latency was meanwhile.
	RegisterBurst int
	// RegisterBurstAt is when the burst fires, from the start; zero means halfway through the
	// measured period (after Warmup).
	RegisterBurstAt time.Duration
	// Alternate, when above zero, alternates the offered load over the measured period: phases
	// of AlternatePeriod at the base rate (Interval) and at Alternate times it, base first, each
	// measured apart after its first AlternateSettle (alternate.go). The summary's Alternate
	// gives each phase's figures and their ratio.
	Alternate       float64
	AlternatePeriod time.Duration
	AlternateSettle time.Duration
	// Seed of the random choices (jitter, churn and kill victims); zero picks one.
	Seed int64
}

func (c Config) withDefaults() Config {
	if c.Address == "" {
		c.Address = AddressDefault
	}
	if c.Namespace == "" {
		c.Namespace = NamespaceDefault
	}
	if c.Workers == 0 {
		c.Workers = WorkersDefault
	}
	if c.Interval == 0 {
		c.Interval = IntervalDefault
	}
	if c.Jitter == 0 {
		c.Jitter = JitterDefault
	}
	if c.Duration == 0 {
		c.Duration = DurationDefault
	}
	if c.ChurnPeriod == 0 {
		c.ChurnPeriod = c.Interval
	}
	if c.API == "" {
		c.API = APIPublic
	}
	if c.WorkersPerClient == 0 {
		c.WorkersPerClient = WorkersPerClientDefault
	}
	if c.Connections == 0 {
		c.Connections = ConnectionsDefault
	}
	if c.PollInterval == 0 {
		c.PollInterval = PollIntervalDefault
	}
	if c.RPCTimeout == 0 {
		c.RPCTimeout = RPCTimeoutDefault
	}
	if c.RecoveryTimeout == 0 {
		lease := max(c.Lease, 3*c.Interval, 30*time.Second)
		c.RecoveryTimeout = 2*time.Minute + 3*lease
	}
	if c.RegisterBurst > 0 && c.RegisterBurstAt == 0 {
		c.RegisterBurstAt = c.Warmup + (c.Duration-c.Warmup)/2
	}
	if c.Alternate > 0 {
		if c.AlternatePeriod == 0 {
			c.AlternatePeriod = AlternatePeriodDefault
		}
		if c.AlternateSettle == 0 {
			c.AlternateSettle = min(c.RPCTimeout, c.AlternatePeriod/2)
		}
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano()
	}
	return c
}

// Validate reports the first setting that cannot work, after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.API != APIPublic && c.API != APILiveness:
		return fmt.Errorf("api %q: want %q or %q", c.API, APIPublic, APILiveness)
	case c.Workers < 1:
		return errors.New("workers must be at least 1")
	case c.Interval < time.Millisecond:
		return errors.New("interval must be at least 1ms")
	case c.Jitter < 0 || c.Jitter >= 1:
		return errors.New("jitter must lie in [0, 1)")
	case c.Duration <= 0:
		return errors.New("duration must be positive")
	case c.Warmup < 0 || c.Warmup >= c.Duration:
		return errors.New("warmup must be at least 0 and shorter than the duration")
	case c.Activities < 0:
		return errors.New("activities must not be negative")
	case c.Alternate < 0:
		return errors.New("alternate must not be negative")
	case c.Alternate > 0 && c.AlternateSettle < 0:
		return errors.New("alternate-settle must not be negative")
	case c.Alternate > 0 && c.AlternatePeriod <= c.AlternateSettle:
		return errors.New("alternate-period must be longer than alternate-settle")
	case c.Alternate > 0 && c.Duration-c.Warmup < 2*c.AlternatePeriod:
		return errors.New("with alternate, the measured period (duration - warmup) must hold at least two phases")
	case c.Activities > frontend.MaxBindingsPerHeartbeat:
		return fmt.Errorf("activities %d: one heartbeat binds at most %d", c.Activities, frontend.MaxBindingsPerHeartbeat)
	case c.Activities > 0 && c.API != APILiveness:
		return errors.New("activities need --api liveness: the public API carries no bindings")
	case c.Churn < 0 || c.Churn > 100:
		return errors.New("churn is a percentage in [0, 100]")
	case c.Kill < 0 || c.Kill > c.Workers:
		return fmt.Errorf("kill %d: want between 0 and the number of workers", c.Kill)
	case c.Lease < 0:
		return errors.New("lease must not be negative")
	case c.Lease > 0 && c.API != APILiveness:
		return errors.New("lease needs --api liveness: SDK heartbeats carry no lease")
	case c.WorkersPerClient < 1 || c.WorkersPerClient > frontend.MaxHeartbeatsPerRequest:
		return fmt.Errorf("workers-per-client must lie in [1, %d]", frontend.MaxHeartbeatsPerRequest)
	case c.WorkersPerClient > 1 && c.API != APIPublic:
		return errors.New("workers-per-client applies to --api public only (the liveness API takes one worker per request)")
	case c.Workers%c.WorkersPerClient != 0:
		return errors.New("workers must be a multiple of workers-per-client")
	case c.Kill%c.WorkersPerClient != 0:
		return errors.New("kill must be a multiple of workers-per-client (a client dies with all its workers)")
	case c.RegisterBurst < 0:
		return errors.New("register-burst must not be negative")
	case c.RegisterBurst%c.WorkersPerClient != 0:
		return errors.New("register-burst must be a multiple of workers-per-client")
	case c.RegisterBurstAt < 0 || (c.RegisterBurst > 0 && c.RegisterBurstAt >= c.Duration):
		return errors.New("register-burst-at must lie within the duration")
	case c.Connections < 1:
		return errors.New("connections must be at least 1")
	case len(c.Addresses()) == 0:
		return errors.New("address: want host:port, or several separated by commas")
	case c.ServerPID < 0:
		return errors.New("server-pid must not be negative")
	case c.StorePID < 0:
		return errors.New("store-pid must not be negative")
	case c.StorePID > 0 && c.ServerPID == 0:
		return errors.New("store-pid needs server-pid: the store's CPU is read over the server's steady window")
	case c.CPUWindow < 0:
		return errors.New("cpu-window must not be negative")
	case c.Warmup+c.CPUWindow > c.Duration:
		return errors.New("cpu-window must end within the duration (warmup + cpu-window <= duration)")
	case c.RegisterBurst > 0 && c.Warmup >= c.RegisterBurstAt:
		return errors.New("with register-burst, the burst must come after the warm-up (the steady window lies between them)")
	case c.RegisterBurst > 0 && c.Warmup+c.CPUWindow > c.RegisterBurstAt:
		return errors.New("with register-burst, cpu-window must end by the burst (warmup + cpu-window <= register-burst-at)")
	}
	if c.MetricsURL != "" {
		if err := checkLoopbackURL(c.MetricsURL); err != nil {
			return err
		}
	}
	for _, address := range c.Addresses() {
		if err := checkLoopback(address); err != nil {
			return err
		}
	}
	return nil
}

// Addresses are the comma-separated addresses of Address.
func (c Config) Addresses() []string {
	var out []string
	for a := range strings.SplitSeq(c.Address, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
