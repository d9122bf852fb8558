// Package gcpacer spaces the Go garbage collector's cycles while the server is busy.
//
// The runtime starts a cycle each time the heap has grown by GOGC % of what the last cycle found
// live. vigil's live heap is small (tens of megabytes for thousands of workers) and what it
// allocates per heartbeat is short-lived, so under load the collector ran several times a
// second and marking took a large share of the host's CPU, which a higher GOGC gives back to
// the requests.
//
// A fixed higher GOGC would keep several times the live heap resident on an idle server, and
// multiply it on a large fleet's. So the pacer sets GOGC from what the host allocates: enough
// room for TargetInterval's worth of allocation between cycles, never more than MaxExtra bytes
// above the live heap. Idle, the rate falls, and GOGC returns to its base, the room the runtime
// would give by itself: as much again as the live heap.
//
// Past MinExtra that room is more than an idle host needs. A large fleet keeps the cached
// state of every worker live, and GOGC 100 holds as much again resident, several times what
// a few seconds of its heartbeats' allocation need. So the room never falls below the smaller of the base's and MinExtra
// bytes: a heap larger than MinExtra is given what its allocation needs and at least MinExtra,
// and a cycle then comes at most every TargetInterval, as under load. A small heap keeps the
// base GOGC. The memory goes back as before (memrelease).
//
// GOGC set in the environment, or GC turned off, is the operator's choice: the pacer then
// leaves it alone. One pacer paces a process; several servers in one process (tests) share it.
package gcpacer

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"

	"github.com/vigilhq/vigil/common/clock"
	metricdefs "github.com/vigilhq/vigil/common/metrics"
)

// Every is how often the allocation rate is sampled and GOGC reconsidered.
const Every = 250 * time.Millisecond

// Config is what the pacer reads on every step.
type Config struct {
	// TargetInterval is the time the host's allocation should take to fill the room left
	// between cycles. <= 0 turns pacing off (GOGC stays at its base).
	TargetInterval func() time.Duration
	// MaxExtra bounds that room, in bytes above the live heap.
	MaxExtra func() int
	// MinExtra is the least room (bytes above the live heap) the pacer leaves once the base
	// GOGC would leave more; nil or <= 0: never below the base GOGC. A process of one P
	// (GOMAXPROCS 1) gets twice this: there each cycle's marking shares the only core with
	// the requests, and more frequent cycles raise a large fleet's tail latency; with two
	// cores they do not.
	MinExtra func() int
}

// Pacer sets GOGC from the allocation rate.
type Pacer struct {
	cfg   Config
	base  int
	gauge tally.Gauge
	// read and set are the runtime's, and procs its GOMAXPROCS at start; replaced in tests.
	read  func() sample
	set   func(int) int
	procs int

	rate    float64 // bytes per second, smoothed
	prev    sample
	prevAt  time.Time
	percent int
}

type sample struct {
	allocs uint64 // bytes allocated since the process started
	live   uint64 // heap found live by the last cycle
	gogc   int    // GOGC in force (-1: off)
}

// newPacer returns a pacer for a process whose GOGC is base.
func newPacer(cfg Config, base int, scope tally.Scope) *Pacer {
	return &Pacer{
		cfg: cfg, base: base, percent: base,
		gauge: metricdefs.GCPercent.With(scope),
		read:  readRuntime, set: debug.SetGCPercent, procs: runtime.GOMAXPROCS(0),
	}
}

// step takes a sample at now and returns the GOGC to run with.
func (p *Pacer) step(now time.Time, s sample) int {
	if !p.prevAt.IsZero() && now.After(p.prevAt) && s.allocs >= p.prev.allocs {
		r := float64(s.allocs-p.prev.allocs) / now.Sub(p.prevAt).Seconds()
		// Smoothed over about a second of steps: one burst does not hold the heap up.
		p.rate += (r - p.rate) / 4
	}
	p.prev, p.prevAt = s, now
	interval := p.cfg.TargetInterval()
	if interval <= 0 || s.live == 0 {
		return p.base
	}
	live := float64(s.live)
	floor := live * float64(p.base) / 100 // the base GOGC's room
	if p.cfg.MinExtra != nil {
		if least := float64(p.cfg.MinExtra()); least > 0 {
			if p.procs == 1 {
				least *= 2 // see Config.MinExtra
			}
			floor = min(floor, least)
		}
	}
	room := min(p.rate*interval.Seconds(), float64(max(0, p.cfg.MaxExtra())))
	return max(1, int(max(room, floor)*100/live))
}

// apply sets percent when it differs from the current one by more than a tenth: each change
// has the runtime recompute its pacing, for nothing if the rate only wobbles.
func (p *Pacer) apply(percent int) {
	if d := percent - p.percent; d == 0 || (percent != p.base && d*10 < p.percent && -d*10 < p.percent) {
		return
	}
	p.set(percent)
	p.percent = percent
	p.gauge.Update(float64(percent))
}

// running is set while a pacer runs in this process.
var running atomic.Bool

// Run paces GOGC until ctx ends, then restores the base. It returns at once if another pacer
// runs in this process or the operator chose GOGC (see the package comment).
func Run(ctx context.Context, cfg Config, ts clock.TimeSource, scope tally.Scope) {
	if os.Getenv("GOGC") != "" || !running.CompareAndSwap(false, true) {
		return
	}
	defer running.Store(false)
	base := readRuntime().gogc
	if base < 0 {
		return // GC turned off
	}
	p := newPacer(cfg, base, scope)
	p.gauge.Update(float64(base))
	defer p.set(base)
	for {
		timerC, timer := ts.NewTimer(Every)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timerC:
			p.apply(p.step(ts.Now(), p.read()))
		}
	}
}

// readRuntime reads the sample from the runtime's metrics (no collection, no stop).
func readRuntime() sample {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}
	metrics.Read(samples)
	s := sample{gogc: -1}
	if v := samples[0].Value; v.Kind() == metrics.KindUint64 {
		s.allocs = v.Uint64()
	}
	if v := samples[1].Value; v.Kind() == metrics.KindUint64 {
		s.live = v.Uint64()
	}
	if v := samples[2].Value; v.Kind() == metrics.KindUint64 {
		s.gogc = int(int64(v.Uint64())) // off reads as -1
	}
	return s
}
