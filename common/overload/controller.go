package overload

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/metrics"
)

var (
	_ Admitter = (*Controller)(nil)
	_ Signal   = (*Controller)(nil)
	_ Pressure = (*Controller)(nil)
)

// Controller is a history host's overload controller (see the package comment). It is safe
// for concurrent use.
type Controller struct {
	cfg Config
	ts  clock.TimeSource

	mu          sync.Mutex
	gates       map[int32]*gate
	queued      int
	queuedBytes int
	queuedByCls [numClasses]int
	// callsDrained is open while writes wait for a slot and closed when none does
	// (YieldToCalls); nil while none waits.
	callsDrained chan struct{}
	// limit is the in-flight limit per shard, host-wide: every shard's writes share the
	// host's store and group committer.
	limit adaptiveLimit
	// writeService is the smoothed time a write holds its slot, host-wide.
	writeService time.Duration
	behind       behindSignal

	// Read without the lock, on every heartbeat, by the transport tap: the writes running
	// (WritersInFlight), every shard's slots summed, the wait each write ahead of a new one
	// adds (writeService ÷ slots, in nanoseconds), and the wait a write arriving now meets.
	writers         atomic.Int64
	slots, perWrite atomic.Int64
	writeWait       atomic.Int64
	// draws accumulates the early refusal's share of every heartbeat judged (RefuseEarly).
	draws atomic.Uint64
	// lateRenewals counts the late renewals (RenewedLate) not yet in the behind signal.
	lateRenewals atomic.Int64
	// The lowest wait a heartbeat met in the current standing interval (lowNow, begun at
	// lowStart, in Unix nanoseconds) and in the one before (lowPrev): RefuseEarly's share
	// applies only to a queue that stood above the target through them.
	lowStart, lowNow, lowPrev atomic.Int64

	// The gauges are set under mu, where their values change: set after it, a stale value
	// could land last and stay. The per-class series are looked up once: a tagged lookup on
	// every call is costly on the heartbeat path.
	queuedGauge, queuedBytesGauge, limitGauge tally.Gauge
	queueDelay                                [numClasses]tally.Timer
	shed, dropped                             [numClasses]tally.Counter
	yieldDelay                                tally.Timer
	earlyRefusals                             tally.Counter
}

type gate struct {
	inFlight int
	// regInFlight counts the registrations among inFlight (registrationSlots).
	regInFlight int
	waiting     [numClasses][]*waiter
	// service is the smoothed time a call holds its slot.
	service time.Duration
}

type waiter struct {
	class    Class
	bytes    int
	enqueued time.Time
	ready    chan struct{}
	granted  bool
}

// serviceTimeInitial is the service time assumed before any call has been measured.
const serviceTimeInitial = 5 * time.Millisecond

// New returns a controller reading cfg, its time from ts and its metrics to scope.
func New(cfg Config, ts clock.TimeSource, scope tally.Scope) *Controller {
	c := &Controller{
		cfg: cfg, ts: ts,
		gates:            make(map[int32]*gate),
		writeService:     serviceTimeInitial,
		behind:           newBehindSignal(ts.Now()),
		queuedGauge:      metrics.AdmissionQueued.With(scope),
		queuedBytesGauge: metrics.AdmissionQueuedBytes.With(scope),
		limitGauge:       metrics.AdmissionInFlightLimit.With(scope),
		yieldDelay:       metrics.OutboundYieldDelay.With(scope),
		earlyRefusals:    metrics.EarlyRefusals.With(scope),
	}
	for cl := range Class(numClasses) {
		kind := metrics.KindTag(cl.String())
		c.queueDelay[cl] = metrics.AdmissionQueueDelay.With(scope, kind)
		c.shed[cl] = metrics.AdmissionShed.With(scope, kind)
		c.dropped[cl] = metrics.AdmissionDropped.With(scope, kind)
	}
	return c
}

// Admit waits for a slot on shardID for a call of class carrying bytes of payload. It returns
// a release to call when the work is done, or an error to return to the caller as is:
// ResourceExhausted (refused: retry later) or DeadlineExceeded/Canceled (the caller is gone).
func (c *Controller) Admit(ctx context.Context, shardID int32, class Class, bytes int) (func(), error) {
	now := c.ts.Now()
	deadline, hasDeadline := clock.DeadlineOf(ctx, c.ts)
	if err := ctx.Err(); err != nil || (hasDeadline && !now.Before(deadline)) {
		c.drop(class, now)
		return nil, callerGone(ctx)
	}
	c.mu.Lock()
	g := c.gateLocked(shardID)
	limit := c.limitLocked()
	if g.inFlight < limit && nothingWaitingAhead(g, class) && g.slotFree(class, limit) {
		c.takeLocked(g, class)
		c.mu.Unlock()
		return c.releaser(g, class, now, now), nil
	}
	c.limit.markSaturated()
	if class == ClassRead && c.queuedByCls[ClassHeartbeat]+c.queuedByCls[ClassRegistration] > 0 {
		c.mu.Unlock()
		c.shed[class].Inc(1)
		return nil, exhausted("history is serving heartbeats first; retry the read later")
	}
	if c.queued+1 > c.cfg.MaxQueued() || c.queuedBytes+bytes > c.cfg.MaxQueuedBytes() {
		c.refuseLocked(class, now)
		c.mu.Unlock()
		return nil, exhausted(fmt.Sprintf("history admission queue is full (%d calls waiting)", c.queued))
	}
	// The work ahead of this call, spread over the shard's slots, each taking the measured
	// service time; then its own service.
	ahead := 0
	for cl := ClassHeartbeat; cl <= class; cl++ {
		ahead += len(g.waiting[cl])
	}
	slots := limit
	if class == ClassRegistration {
		slots = registrationSlots(limit)
	}
	wait := time.Duration(float64(ahead+1)/float64(slots)*float64(g.service)) + g.service
	maxDelay := c.cfg.HeartbeatMaxQueueDelay()
	if class == ClassRead {
		maxDelay = c.cfg.MaxQueueDelay()
	}
	if (hasDeadline && now.Add(wait).After(deadline)) || (maxDelay > 0 && wait > maxDelay) {
		c.refuseLocked(class, now)
		c.mu.Unlock()
		return nil, exhausted(fmt.Sprintf("history shard %d is behind: about %v of work queued ahead of this call; retry later",
			shardID, wait.Round(time.Millisecond)))
	}
	w := &waiter{class: class, bytes: bytes, enqueued: now, ready: make(chan struct{})}
	g.waiting[class] = append(g.waiting[class], w)
	c.queued++
	c.queuedBytes += bytes
	c.queuedByCls[class]++
	c.queueChangedLocked(limit)
	c.mu.Unlock()

	select {
	case <-w.ready:
	case <-ctx.Done():
		c.mu.Lock()
		if !w.granted {
			c.removeWaiterLocked(g, w)
			c.mu.Unlock()
			c.drop(class, c.ts.Now())
			return nil, callerGone(ctx)
		}
		c.mu.Unlock()
		// Granted as the caller left: pass the slot on.
		c.releaser(g, class, w.enqueued, c.ts.Now())()
		c.drop(class, c.ts.Now())
		return nil, callerGone(ctx)
	}
	granted := c.ts.Now()
	c.queueDelay[class].Record(granted.Sub(w.enqueued))
	release := c.releaser(g, class, w.enqueued, granted)
	if hasDeadline && !granted.Before(deadline) {
		release()
		c.drop(class, granted)
		return nil, serviceerror.NewDeadlineExceeded("the call's deadline passed while it waited for history")
	}
	return release, nil
}

// RefuseEarly implements Pressure. The wait a heartbeat arriving now would meet is the larger
// of the writes queued in history and the heartbeats let through and not answered (still
// being read, decoded and routed, or queued, or in a slot) at the host's pace: under load a
// call spends a long time between the tap and admission, and counted only once queued, a
// burst let through while the queue looked short overshoots it by seconds of work.
//
// It is refused when that wait would outlast its deadline, which admission would find too
// after reading it. Otherwise it is judged against frontend.earlyRefusalTargetWait: up to the
// target nothing is refused; beyond it a share that grows with the excess, every heartbeat at
// twice the target. The target is short beside any caller's deadline because the estimate is
// the store's pace, and a host short of CPU is slower than that: a heartbeat let through to
// wait longer is often answered after its caller gave up. The share is spread evenly over the
// heartbeats as they arrive (an error-diffusion counter, not a random draw), so it is exact
// over any run of calls: refusing all or nothing at one line let a burst through whole, then
// refused everything while it drained.
//
// As in CoDel, the share applies only to a standing queue: one whose wait stayed above the
// target for a whole standingInterval. A burst (a fleet's registrations ending, a stall of the
// store) fills the queue for less than that and drains within its callers' deadlines; refused,
// its heartbeats would be failures of a host that keeps up.
func (c *Controller) RefuseEarly(outstanding int, left time.Duration) bool {
	// The wait comes first: it is two atomic loads, and zero on a host that keeps up, which
	// then never reads the setting or the clock.
	wait := max(time.Duration(c.writeWait.Load()), c.waitBehind(outstanding))
	if wait <= 0 {
		if c.lowNow.Load() != 0 {
			c.lowNow.Store(0)
		}
		return false
	}
	target := c.cfg.EarlyRefusalTargetWait()
	if target <= 0 {
		return false
	}
	if left > 0 && wait >= left {
		return true
	}
	if c.standingWait(wait) <= target {
		return false
	}
	share := refusedShare(wait, target)
	return share > 0 && c.draw(share)
}

// standingInterval is how long the wait must stay above the target before RefuseEarly's
// share applies: longer than a stall of the store or the tail of a registration burst, short
// beside a heartbeat's interval and the lease of three.
const standingInterval = time.Second

// standingWait records wait, which a heartbeat meets now, and returns the lowest wait met
// since the start of the previous standing interval: above the target, the queue has stood
// there for at least one interval.
func (c *Controller) standingWait(wait time.Duration) time.Duration {
	now := c.ts.Now().UnixNano()
	start := c.lowStart.Load()
	if elapsed := now - start; elapsed >= int64(standingInterval) {
		if c.lowStart.CompareAndSwap(start, now) {
			prev := c.lowNow.Swap(int64(wait))
			if elapsed >= 2*int64(standingInterval) {
				prev = 0 // no heartbeat for a whole interval: nothing stood
			}
			c.lowPrev.Store(prev)
		}
	} else {
		for low := c.lowNow.Load(); int64(wait) < low && !c.lowNow.CompareAndSwap(low, int64(wait)); low = c.lowNow.Load() {
		}
	}
	return time.Duration(min(c.lowPrev.Load(), c.lowNow.Load()))
}

// RefusedEarly implements Pressure.
func (c *Controller) RefusedEarly(n int) {
	if n <= 0 {
		return
	}
	c.earlyRefusals.Inc(int64(n))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.behind.count(c.ts.Now(), n, true)
}

// shareOne is a refused share of 1 (every heartbeat) in the units of Controller.draws.
const shareOne = 1 << 10

// refusedShare is the share of heartbeats to refuse, in 1/shareOne, when a new one would wait
// wait against target: none up to the target, then growing with the excess, all from twice
// the target on.
func refusedShare(wait, target time.Duration) uint64 {
	if wait <= target {
		return 0
	}
	if wait >= 2*target {
		return shareOne
	}
	return uint64((wait - target) * shareOne / target)
}

// draw adds share to the running sum and says whether this heartbeat is one to refuse: whether
// the sum crossed a multiple of shareOne.
func (c *Controller) draw(share uint64) bool {
	sum := c.draws.Add(share)
	return sum/shareOne != (sum-share)/shareOne
}

// waitBehind is how long a write would wait behind n writes on their way to this host: the
// slots take the first of them at once, and each of the rest adds the service time spread
// over the slots.
func (c *Controller) waitBehind(n int) time.Duration {
	ahead := int64(n) - c.slots.Load()
	if ahead <= 0 {
		return 0
	}
	return time.Duration(ahead * c.perWrite.Load())
}

// EstimatedWait is how long a write arriving now would wait for a slot: the writes queued
// host-wide, spread over every shard's slots, each taking the host's measured service time.
func (c *Controller) EstimatedWait() time.Duration { return time.Duration(c.writeWait.Load()) }

// WritersInFlight is how many admitted writes (heartbeats and registrations) are running,
// host-wide: the group committer waits for their writes to batch them together
// (persistence.GroupCommitter.ExpectWritesFrom).
func (c *Controller) WritersInFlight() int { return int(c.writers.Load()) }

// InFlightLimit returns the current in-flight limit per shard.
func (c *Controller) InFlightLimit() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limitLocked()
}

// Queued returns the calls waiting for a slot and their payload bytes, host-wide.
func (c *Controller) Queued() (calls, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued, c.queuedBytes
}

// YieldToCalls returns once no write waits for a slot, or after most, whichever comes first
// (at once when none waits, or when ctx ends). The outbound queues call it before a
// background delivery, so that while the host is behind on its calls the cores and the store
// go to the callers first; most bounds the delay, so background work still runs while calls
// queue without end.
func (c *Controller) YieldToCalls(ctx context.Context, most time.Duration) {
	c.mu.Lock()
	drained := c.callsDrained
	c.mu.Unlock()
	if drained == nil || most <= 0 {
		return
	}
	start := c.ts.Now()
	timeout, t := c.ts.NewTimer(most)
	defer t.Stop()
	select {
	case <-drained:
	case <-timeout:
	case <-ctx.Done():
	}
	c.yieldDelay.Record(c.ts.Now().Sub(start))
}

func (c *Controller) limitLocked() int {
	return c.limit.current(c.cfg.MinInFlightPerShard(), c.cfg.MaxInFlightPerShard(), c.cfg.TargetLatency())
}

// nothingWaitingAhead: a call may take a free slot only if no call of its class or a higher
// one waits for the gate (it would overtake it).
func nothingWaitingAhead(g *gate, class Class) bool {
	for cl := ClassHeartbeat; cl <= class; cl++ {
		if len(g.waiting[cl]) > 0 {
			return false
		}
	}
	return true
}

func (c *Controller) gateLocked(shardID int32) *gate {
	g, ok := c.gates[shardID]
	if !ok {
		g = &gate{service: serviceTimeInitial}
		c.gates[shardID] = g
	}
	return g
}

// releaser returns the function that frees the slot taken at start, measures the service time
// (and a heartbeat's whole time in history, from arrival, for the behind signal), feeds the
// adaptive limit and hands free slots to the next waiters, highest class first.
func (c *Controller) releaser(g *gate, class Class, arrived, start time.Time) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			now := c.ts.Now()
			took := now.Sub(start)
			c.mu.Lock()
			defer c.mu.Unlock()
			if class == ClassHeartbeat {
				c.behind.served(now, now.Sub(arrived))
				c.lateLocked(now)
			}
			g.service += (took - g.service) / 10
			g.inFlight--
			if class == ClassRegistration {
				g.regInFlight--
			}
			if c.queued > 0 {
				c.limit.markSaturated()
			}
			if class != ClassRead {
				c.writers.Add(-1)
				c.writeService += (took - c.writeService) / 20
				// Reads do not write: their time says nothing about the store.
				c.limit.observe(now, took, c.cfg.MinInFlightPerShard(), c.cfg.MaxInFlightPerShard(), c.cfg.TargetLatency())
			}
			limit := c.limitLocked()
			for g.inFlight < limit && c.grantNextLocked(g, limit) {
			}
			c.limitGauge.Update(float64(limit))
			c.updateWriteWaitLocked(limit)
		})
	}
}

// registrationSlots is how many of a shard's slots registrations may hold at once: all but a
// quarter. Their creates commit behind heartbeats (persistence.GroupCommitCreateShare), and a
// burst holding every slot while it waits would leave known workers' heartbeats queued behind
// it.
func registrationSlots(limit int) int { return max(1, limit-max(1, limit/4)) }

// slotFree says whether a call of class may take one of the limit slots now.
func (g *gate) slotFree(class Class, limit int) bool {
	return class != ClassRegistration || g.regInFlight < registrationSlots(limit)
}

func (c *Controller) takeLocked(g *gate, class Class) {
	g.inFlight++
	if class == ClassRegistration {
		g.regInFlight++
	}
	if class != ClassRead {
		c.writers.Add(1)
	}
}

// grantNextLocked gives a slot of g to its oldest waiter of the highest class that may take
// one, if any.
func (c *Controller) grantNextLocked(g *gate, limit int) bool {
	for cl := ClassHeartbeat; cl < numClasses; cl++ {
		if len(g.waiting[cl]) == 0 || !g.slotFree(cl, limit) {
			continue
		}
		w := g.waiting[cl][0]
		g.waiting[cl][0] = nil
		g.waiting[cl] = g.waiting[cl][1:]
		c.dequeuedLocked(w, limit)
		w.granted = true
		c.takeLocked(g, cl)
		close(w.ready)
		return true
	}
	return false
}

func (c *Controller) removeWaiterLocked(g *gate, w *waiter) {
	q := g.waiting[w.class]
	for i, x := range q {
		if x == w {
			copy(q[i:], q[i+1:])
			q[len(q)-1] = nil
			g.waiting[w.class] = q[:len(q)-1]
			c.dequeuedLocked(w, c.limitLocked())
			return
		}
	}
}

func (c *Controller) dequeuedLocked(w *waiter, limit int) {
	c.queued--
	c.queuedBytes -= w.bytes
	c.queuedByCls[w.class]--
	c.queueChangedLocked(limit)
}

// queueChangedLocked publishes the queue after it changed: its gauges, the estimated wait,
// and whether writes wait (YieldToCalls).
func (c *Controller) queueChangedLocked(limit int) {
	c.queuedGauge.Update(float64(c.queued))
	c.queuedBytesGauge.Update(float64(c.queuedBytes))
	c.updateWriteWaitLocked(limit)
	switch waiting := c.queuedByCls[ClassHeartbeat]+c.queuedByCls[ClassRegistration] > 0; {
	case waiting && c.callsDrained == nil:
		c.callsDrained = make(chan struct{})
	case !waiting && c.callsDrained != nil:
		close(c.callsDrained)
		c.callsDrained = nil
	}
}

// updateWriteWaitLocked recomputes what the tap reads without the lock after the queue or
// the service time changed; limit is the in-flight limit per shard.
func (c *Controller) updateWriteWaitLocked(limit int) {
	slots := max(1, len(c.gates)*limit)
	perWrite := int64(c.writeService) / int64(slots)
	c.slots.Store(int64(slots))
	c.perWrite.Store(perWrite)
	queued := c.queuedByCls[ClassHeartbeat] + c.queuedByCls[ClassRegistration]
	c.writeWait.Store(int64(queued) * perWrite)
}

// refuseLocked counts a call refused at once; a heartbeat refused counts for the behind
// signal.
func (c *Controller) refuseLocked(class Class, now time.Time) {
	c.shed[class].Inc(1)
	if class == ClassHeartbeat {
		c.behind.count(now, 1, true)
	}
}

// drop counts a call dropped unserved, its caller gone; a heartbeat dropped counts for the
// behind signal as refused.
func (c *Controller) drop(class Class, now time.Time) {
	c.dropped[class].Inc(1)
	if class == ClassHeartbeat {
		c.mu.Lock()
		c.behind.count(now, 1, true)
		c.mu.Unlock()
	}
}

func exhausted(msg string) error {
	return serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_SYSTEM_OVERLOADED, msg)
}

func callerGone(ctx context.Context) error {
	if ctx.Err() == context.Canceled {
		return serviceerror.NewCanceled("the caller went away before history served the call")
	}
	return serviceerror.NewDeadlineExceeded("the call's deadline passed before history could serve it")
}
