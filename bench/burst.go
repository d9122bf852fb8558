package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The backoff of a burst worker whose registration was refused: doubling from
// registerBackoffMin to registerBackoffMax, each wait drawn uniformly from its upper half, as
// an SDK's retry policy spreads its retries so that a refused crowd does not come back in step.
const (
	registerBackoffMin = 100 * time.Millisecond
	registerBackoffMax = 2 * time.Second
)

// burstWatch follows a registration burst (Config.RegisterBurst): the new workers' first
// heartbeats, and the fleet's latency while they are being registered.
type burstWatch struct {
	r       *runner
	clients []*simClient
	workers int

	firedAt    atomic.Int64 // unix nanos of the burst; 0 before it
	finishedAt atomic.Int64 // unix nanos of the last registration; 0 before it
	pending    atomic.Int64 // burst workers not yet registered
	registered atomic.Int64
	attempts   atomic.Int64 // registration RPCs, retries included
	refused    atomic.Int64 // of them answered ResourceExhausted
	retried    atomic.Int64 // burst workers that needed more than one attempt
	done       chan struct{}

	// regLat runs from the burst to each registration's OK (per RPC).
	regLat *latencyRecorder
	// during and outside are the fleet's heartbeats sent while the burst was being registered
	// and at any other measured time.
	during, outside *latencyRecorder

	mu     sync.Mutex
	byCode map[string]int64 // failed registration attempts by gRPC code
}

func newBurstWatch(r *runner, firstIndex int) *burstWatch {
	b := &burstWatch{
		r: r, workers: r.cfg.RegisterBurst, done: make(chan struct{}),
		regLat: newLatencyRecorder(), during: newLatencyRecorder(), outside: newLatencyRecorder(),
		byCode: map[string]int64{},
	}
	b.clients = make([]*simClient, r.cfg.RegisterBurst/r.cfg.WorkersPerClient)
	for i := range b.clients {
		b.clients[i] = newSimClient(r, firstIndex+i)
		b.clients[i].burst = b
	}
	b.pending.Store(int64(b.workers))
	return b
}

// fire starts every burst client at once; they register, then heartbeat until stop.
func (b *burstWatch) fire(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) {
	b.r.cost.read(readBurst)
	now := time.Now()
	b.firedAt.Store(now.UnixNano())
	for _, c := range b.clients {
		wg.Go(func() {
			if !c.register(ctx, stop) {
				close(c.done)
				return
			}
			now := time.Now()
			c.run(ctx, now.Add(c.jittered(now)), stop)
		})
	}
}

// inWindow says whether a fleet heartbeat sent at t falls in the burst's window: after the
// burst fired and before its last worker was registered.
func (b *burstWatch) inWindow(t time.Time) bool {
	fired := b.firedAt.Load()
	if fired == 0 || t.UnixNano() < fired {
		return false
	}
	finished := b.finishedAt.Load()
	return finished == 0 || t.UnixNano() <= finished
}

// recordFleet files a fleet heartbeat's latency by when it was sent.
func (b *burstWatch) recordFleet(sent time.Time, took time.Duration) {
	if b.inWindow(sent) {
		b.during.record(took)
	} else {
		b.outside.record(took)
	}
}

func (b *burstWatch) registeredOne(c *simClient, at time.Time, attempts int) {
	n := int64(len(c.workers))
	b.regLat.record(at.Sub(time.Unix(0, b.firedAt.Load())))
	b.registered.Add(n)
	if attempts > 1 {
		b.retried.Add(n)
	}
	if b.pending.Add(-n) == 0 {
		b.r.cost.read(readBurstFinished)
		b.finishedAt.Store(at.UnixNano())
		close(b.done)
	}
}

func (b *burstWatch) failedAttempt(err error) {
	if status.Code(err) == codes.ResourceExhausted {
		b.refused.Add(1)
	}
	b.mu.Lock()
	b.byCode[status.Code(err).String()]++
	b.mu.Unlock()
}

// progress is (registered, of) for the progress line; ok=false before the burst.
func (b *burstWatch) progress() (registered, of int64, ok bool) {
	if b == nil || b.firedAt.Load() == 0 {
		return 0, 0, false
	}
	return b.registered.Load(), int64(b.workers), true
}

// register sends the client's first heartbeat until it is answered OK, backing off after each
// refusal. It returns false if the run ended first.
func (c *simClient) register(ctx context.Context, stop <-chan struct{}) bool {
	b := c.burst
	backoff := registerBackoffMin
	for attempt := 1; ; attempt++ {
		b.attempts.Add(1)
		now := time.Now()
		callCtx, cancel := context.WithTimeout(ctx, c.r.cfg.RPCTimeout)
		_, err := c.send(callCtx, now)
		cancel()
		for _, w := range c.workers {
			w.lastSent, w.lastFailed = now, err != nil
		}
		if err == nil {
			c.registered = true
			c.r.countAnswered(c)
			b.registeredOne(c, time.Now(), attempt)
			return true
		}
		b.failedAttempt(err)
		wait := backoff/2 + time.Duration(c.rng.Int64N(int64(backoff/2)+1))
		backoff = min(2*backoff, registerBackoffMax)
		t := time.NewTimer(wait)
		select {
		case <-stop:
			t.Stop()
			return false
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// BurstSummary describes a registration burst (--register-burst).
type BurstSummary struct {
	Workers int `json:"workers"`
	// AtS is when the burst fired, from the start of the load (warm-up included).
	AtS        float64 `json:"at_s"`
	Registered int64   `json:"registered"`
	// AllRegisteredMs runs from the burst to the last of its workers answered OK; absent
	// when not all were registered before the load ended.
	AllRegisteredMs *float64 `json:"all_registered_ms,omitempty"`
	// Register* are per registration RPC, from the burst to its OK (retries included).
	RegisterP50Ms float64 `json:"register_p50_ms"`
	RegisterP99Ms float64 `json:"register_p99_ms"`
	RegisterMaxMs float64 `json:"register_max_ms"`
	// Attempts are the registration RPCs sent, retries included; Refused of them were answered
	// ResourceExhausted; RetriedWorkers needed more than one attempt.
	Attempts       int64            `json:"attempts"`
	Refused        int64            `json:"refused"`
	RetriedWorkers int64            `json:"retried_workers"`
	ErrorsByCode   map[string]int64 `json:"errors_by_code"`
	// WindowS is how long the burst window lasted (until the last registration, or the end).
	WindowS float64 `json:"window_s"`
	// The fleet's heartbeats (per RPC) sent during the burst window, and at every other
	// measured time.
	During  LatencySummary `json:"fleet_during_burst"`
	Outside LatencySummary `json:"fleet_outside_burst"`
}

// LatencySummary is the latency of a set of heartbeat RPCs.
type LatencySummary struct {
	Count int64   `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

func latencySummary(r *latencyRecorder) LatencySummary {
	s := r.snapshot()
	if s.count == 0 {
		return LatencySummary{}
	}
	return LatencySummary{Count: s.count, P50Ms: s.p50, P99Ms: s.p99, MaxMs: s.max}
}

func (b *burstWatch) summary(start, end time.Time) BurstSummary {
	reg := b.regLat.snapshot()
	s := BurstSummary{
		Workers:        b.workers,
		Registered:     b.registered.Load(),
		RegisterP50Ms:  reg.p50,
		RegisterP99Ms:  reg.p99,
		RegisterMaxMs:  reg.max,
		Attempts:       b.attempts.Load(),
		Refused:        b.refused.Load(),
		RetriedWorkers: b.retried.Load(),
		During:         latencySummary(b.during),
		Outside:        latencySummary(b.outside),
	}
	b.mu.Lock()
	s.ErrorsByCode = make(map[string]int64, len(b.byCode))
	for code, n := range b.byCode {
		s.ErrorsByCode[code] = n
	}
	b.mu.Unlock()
	fired := b.firedAt.Load()
	if fired == 0 {
		return s
	}
	s.AtS = time.Unix(0, fired).Sub(start).Seconds()
	windowEnd := end
	if finished := b.finishedAt.Load(); finished != 0 {
		windowEnd = time.Unix(0, finished)
		all := ms(windowEnd.Sub(time.Unix(0, fired)))
		s.AllRegisteredMs = &all
	}
	s.WindowS = windowEnd.Sub(time.Unix(0, fired)).Seconds()
	return s
}
