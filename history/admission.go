package history

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/vigilhq/vigil/common/admission"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// AdmissionClass orders the work history admits when it cannot serve everything at once; the
// classes are declared below history (common/admission) so that the libraries classify their
// calls without importing history.
type AdmissionClass = admission.Class

// The classes, highest priority first.
const (
	ClassHeartbeat    = admission.ClassHeartbeat
	ClassRegistration = admission.ClassRegistration
	ClassRead         = admission.ClassRead

	numClasses = admission.NumClasses
)

// ListGate is the gate of calls that span every shard (lists and counts).
const ListGate = admission.ListGate

var (
	_ admission.Admitter   = (*Admission)(nil)
	_ admission.LoadSignal = (*Admission)(nil)
	_ admission.Pressure   = (*Admission)(nil)
)

// AdmissionConfig is what the admission controller reads at use time.
type AdmissionConfig struct {
	MaxInFlightPerShard func() int
	MinInFlightPerShard func() int
	TargetLatency       func() time.Duration
	MaxQueueDelay       func() time.Duration
	// HeartbeatMaxQueueDelay bounds a heartbeat's expected wait instead of MaxQueueDelay.
	HeartbeatMaxQueueDelay func() time.Duration
	MaxQueued              func() int
	MaxQueuedBytes         func() int
	RegistrationAdmitRPS   func() float64
	// RefusedShareBehind is the share of heartbeats refused (or dropped) above which the host
	// counts as behind for HeartbeatQueueDelay. <= 0 disables.
	RefusedShareBehind func() float64
}

// NewAdmissionConfig reads the settings from dynamic config.
func NewAdmissionConfig(dc *dynamicconfig.Collection) AdmissionConfig {
	return AdmissionConfig{
		MaxInFlightPerShard:    dynamicconfig.AdmissionMaxInFlightPerShard.Get(dc),
		MinInFlightPerShard:    dynamicconfig.AdmissionMinInFlightPerShard.Get(dc),
		TargetLatency:          dynamicconfig.AdmissionTargetLatency.Get(dc),
		MaxQueueDelay:          dynamicconfig.AdmissionMaxQueueDelay.Get(dc),
		HeartbeatMaxQueueDelay: dynamicconfig.AdmissionHeartbeatMaxQueueDelay.Get(dc),
		MaxQueued:              dynamicconfig.AdmissionMaxQueued.Get(dc),
		MaxQueuedBytes:         dynamicconfig.AdmissionMaxQueuedBytes.Get(dc),
		RegistrationAdmitRPS:   dynamicconfig.RegistrationAdmitRPS.Get(dc),
		RefusedShareBehind:     dynamicconfig.ExpiryBrakeRefusedShare.Get(dc),
	}
}

// Admission bounds the work history does at once, per shard, and decides what waits, what is
// refused and what is dropped when more arrives than the store can write:
//
//   - at most a limit of calls run per shard; the others wait in one FIFO per class, and a
//     freed slot goes to the oldest waiter of the highest class. The limit adapts between
//     MinInFlightPerShard and MaxInFlightPerShard (adaptiveLimit): it shrinks while admitted
//     writes take longer than TargetLatency, and grows while they are quick and calls wait;
//   - a call that would wait longer than its caller's deadline allows, or longer than
//     MaxQueueDelay (queue ahead of it ÷ slots × the shard's measured service time), is refused
//     at once with ResourceExhausted, which clients retry with backoff, instead of being
//     served after its caller gave up. A heartbeat's bound is HeartbeatMaxQueueDelay instead,
//     longer (maxQueueDelay says why) and at most admission.RetryHorizon, and one whose caller
//     retries refusals until its deadline anyway (admission.WithPatience: the Go SDK's
//     heartbeats) may wait that long: a refusal would only bring it back to be read again;
//   - a call whose deadline has passed, on arrival or while it waited, is dropped unserved;
//   - waiting calls and their payload bytes are counted host-wide and capped, so memory stays
//     bounded however much is offered;
//   - registrations pass a token bucket first (delayed, not refused, when the delay fits the
//     deadline), so a fleet's start or mass reconnect is absorbed at a bounded rate.
//
// The point is goodput: an overloaded server that spends its time on calls whose callers have
// already timed out never catches up.
type Admission struct {
	cfg    AdmissionConfig
	ts     clock.TimeSource
	logger *zap.Logger

	mu          sync.Mutex
	gates       map[int32]*gate
	queued      int
	queuedBytes int
	queuedByCls [numClasses]int
	// callsDrained is open while heartbeats or registrations wait for a slot and closed when
	// none does (YieldToCalls); nil while none waits.
	callsDrained chan struct{}
	regLimiter   *rate.Limiter
	regRate      float64
	hbQueueDelay time.Duration // recent heartbeat queueing delay, smoothed, host-wide
	hbDelayAt    time.Time
	// hbCounts counts the heartbeats served and refused (or dropped) in each of the last
	// heartbeatRecord seconds, from recordFrom (the second the host started) on: the last
	// refusalWindow of them say whether the host is behind, and all of them how likely a
	// worker's silence is the host's doing (RefusedShare). hbLost is the smoothed wait the
	// refused would have needed (at least what was left of their deadline).
	hbCounts   heartbeatRing
	recordFrom int64
	hbLost     time.Duration
	// retriesUntil is until when heartbeats refused early that their callers retry may still
	// come (RetriesPendingUntil).
	retriesUntil time.Time
	// limit is the in-flight limit per shard, host-wide: every shard's writes share the
	// host's store and group committer.
	limit adaptiveLimit
	// writers counts the admitted heartbeats and registrations running (WritersInFlight).
	writers atomic.Int64
	// writeService is the smoothed time a write (heartbeat or registration) holds its slot,
	// host-wide, and writeWait the wait a write arriving now is estimated to meet, in
	// nanoseconds (EstimatedWait, read without the lock).
	writeService time.Duration
	writeWait    atomic.Int64
	// slots is every shard's in-flight limit summed, and perWrite the wait each write ahead of
	// a new one adds (writeService ÷ slots), in nanoseconds: WaitBehind, read without the lock.
	slots, perWrite atomic.Int64
	// The gauges export queued, queuedBytes and the limit. They are set under mu, where the
	// values change: set after it, a stale value could land last and stay.
	queuedGauge, queuedBytesGauge, limitGauge tally.Gauge
	// The per-class series, looked up once: a tagged lookup on every call is costly on the
	// heartbeat path.
	queueDelay    [numClasses]tally.Timer
	yieldDelay    tally.Timer // OutboundYieldDelay
	shed, dropped [numClasses]tally.Counter
	pacingDelay   tally.Timer
}

// refusalWindow is how many seconds of heartbeats the refused share is taken over, and
// refusalsBehindMin how many refusals in them it takes at least: a share over a few hundred
// heartbeats (a fraction of a second in a large fleet) turned a passing burst of refusals into
// "behind", and every catch-up after it held expiries for another lease.
const (
	refusalWindow     = 5
	refusalsBehindMin = 5
)

// heartbeatRecord is how many seconds of heartbeat counts the host keeps for RefusedShare
// (48 KiB): the expiry brake can weigh a silence of up to about half an hour.
const heartbeatRecord = 2048

// heartbeatCount is one second's heartbeats.
type heartbeatCount struct {
	second          int64
	served, refused int
}

type gate struct {
	inFlight int
	// regInFlight counts the registrations among inFlight; they may hold at most
	// registrationSlots of the limit, so heartbeats always find slots of their own.
	regInFlight int
	waiting     [numClasses][]*waiter
	// service is the smoothed time a call holds its slot.
	service time.Duration
}

type waiter struct {
	class    AdmissionClass
	bytes    int
	enqueued time.Time
	ready    chan struct{}
	granted  bool
}

// serviceTimeInitial is the service time assumed before any call has been measured.
const serviceTimeInitial = 5 * time.Millisecond

// NewAdmission returns an admission controller.
func NewAdmission(cfg AdmissionConfig, ts clock.TimeSource, scope tally.Scope, logger *zap.Logger) *Admission {
	a := &Admission{
		cfg: cfg, ts: ts, logger: logger,
		gates:            make(map[int32]*gate),
		writeService:     serviceTimeInitial,
		queuedGauge:      metrics.AdmissionQueued.With(scope),
		queuedBytesGauge: metrics.AdmissionQueuedBytes.With(scope),
		limitGauge:       metrics.AdmissionInFlightLimit.With(scope),
		pacingDelay:      metrics.AdmissionQueueDelay.With(scope, metrics.KindTag("registrationPacing")),
		yieldDelay:       metrics.OutboundYieldDelay.With(scope),
		recordFrom:       ts.Now().Unix(),
	}
	for c := range AdmissionClass(numClasses) {
		kind := metrics.KindTag(c.String())
		a.queueDelay[c] = metrics.AdmissionQueueDelay.With(scope, kind)
		a.shed[c] = metrics.AdmissionShed.With(scope, kind)
		a.dropped[c] = metrics.AdmissionDropped.With(scope, kind)
	}
	return a
}

// Admit waits for a slot on shardID for a call of class carrying bytes of payload. It returns
// a release to call when the work is done, or an error to return to the caller as is:
// ResourceExhausted (refused: retry later) or DeadlineExceeded/Canceled (the caller is gone).
func (a *Admission) Admit(ctx context.Context, shardID int32, class AdmissionClass, bytes int) (func(), error) {
	now := a.ts.Now()
	deadline, hasDeadline := clock.DeadlineOf(ctx, a.ts)
	if err := ctx.Err(); err != nil || (hasDeadline && !now.Before(deadline)) {
		a.countDropped(class)
		return nil, callerGone(ctx)
	}
	if class == ClassRegistration {
		if err := a.paceRegistration(ctx, now, deadline, hasDeadline, shardID); err != nil {
			return nil, err
		}
		now = a.ts.Now()
	}

	a.mu.Lock()
	g := a.gateLocked(shardID)
	limit := a.limitLocked()
	if g.inFlight < limit && a.nothingWaitingAheadLocked(g, class) && g.slotFree(class, limit) {
		a.takeLocked(g, class)
		a.mu.Unlock()
		return a.releaser(g, class, now, now), nil
	}
	a.limit.markSaturated()
	if class == ClassRead && a.queuedByCls[ClassHeartbeat]+a.queuedByCls[ClassRegistration] > 0 {
		a.mu.Unlock()
		a.countShed(class)
		return nil, exhausted("history is serving heartbeats first; retry the read later")
	}
	if a.queued+1 > a.cfg.MaxQueued() || a.queuedBytes+bytes > a.cfg.MaxQueuedBytes() {
		a.stillBehindLocked(class, 0, a.lostWait(now, deadline, hasDeadline, 0))
		a.mu.Unlock()
		a.countShed(class)
		return nil, exhausted(fmt.Sprintf("history admission queue is full (%d calls waiting)", a.queued))
	}
	// Work ahead of this call, spread over the shard's slots, each taking the measured service
	// time; then its own service.
	ahead := 0
	for c := ClassHeartbeat; c <= class; c++ {
		ahead += len(g.waiting[c])
	}
	slots := limit
	if class == ClassRegistration {
		slots = registrationSlots(limit)
	}
	wait := time.Duration(float64(ahead+1)/float64(slots)*float64(g.service)) + g.service
	maxDelay := a.maxQueueDelay(ctx, class, hasDeadline)
	if (hasDeadline && now.Add(wait).After(deadline)) || (maxDelay > 0 && wait > maxDelay) {
		// A heartbeat refused here is as lost as one that waited out its deadline: count it
		// so for the host's delay measure, which the expiry brake reads.
		a.stillBehindLocked(class, wait, a.lostWait(now, deadline, hasDeadline, wait))
		a.mu.Unlock()
		a.countShed(class)
		return nil, exhausted(fmt.Sprintf("history shard %d is behind: about %v of work queued ahead of this call; retry later",
			shardID, wait.Round(time.Millisecond)))
	}
	w := &waiter{class: class, bytes: bytes, enqueued: now, ready: make(chan struct{})}
	g.waiting[class] = append(g.waiting[class], w)
	a.queued++
	a.queuedBytes += bytes
	a.queuedByCls[class]++
	a.queueChangedLocked(limit)
	a.mu.Unlock()

	select {
	case <-w.ready:
	case <-ctx.Done():
		a.mu.Lock()
		if !w.granted {
			a.removeWaiterLocked(g, w)
			waited := a.ts.Now().Sub(w.enqueued)
			a.stillBehindLocked(class, waited, waited)
			a.mu.Unlock()
			a.countDropped(class)
			return nil, callerGone(ctx)
		}
		a.mu.Unlock()
		// Granted as the caller left: pass the slot on.
		a.releaser(g, class, w.enqueued, a.ts.Now())()
		a.countDropped(class)
		return nil, callerGone(ctx)
	}
	granted := a.ts.Now()
	a.queueDelay[class].Record(granted.Sub(w.enqueued))
	release := a.releaser(g, class, w.enqueued, granted)
	if hasDeadline && !granted.Before(deadline) {
		release()
		a.countDropped(class)
		return nil, serviceerror.NewDeadlineExceeded("the call's deadline passed while it waited for history")
	}
	return release, nil
}

// maxQueueDelay is the longest a call of class may be expected to wait for a slot; 0 (a
// registration or a read, with MaxQueueDelay 0): no bound but its deadline.
//
// A heartbeat may wait longer than other calls (HeartbeatMaxQueueDelay): by the time it
// reaches admission it has been read, decoded, authorized and routed, which is most of what
// serving it costs besides its write, and refused here that work is thrown away and the
// heartbeat is lost, or read again if its caller retries. Refused past admission's 2 s like
// other calls, a host far past its capacity shed a heartbeat after reading it for every few
// it served, and served fewer than when they waited. The frontend's early refusal in front,
// which refuses heartbeats before they are read while the wait is long, is what keeps this
// queue short.
func (a *Admission) maxQueueDelay(ctx context.Context, class AdmissionClass, hasDeadline bool) time.Duration {
	if class != ClassHeartbeat {
		return a.cfg.MaxQueueDelay()
	}
	// At most admission.RetryHorizon: the expiry brake allows a host to hold a heartbeat that
	// long before it answers (heldGap in chasm/worker/brake.go), and no longer.
	maxDelay := a.cfg.HeartbeatMaxQueueDelay()
	if maxDelay <= 0 || maxDelay > admission.RetryHorizon || (hasDeadline && admission.Patient(ctx)) {
		// A patient heartbeat's caller would send it again after a refusal, to be read and
		// judged again: it waits for its turn instead, as long as its deadline allows
		// (admission.WithPatience).
		maxDelay = admission.RetryHorizon
	}
	return maxDelay
}

// HeartbeatQueueDelay is how long heartbeats have recently spent in history, waiting for a
// slot and then for their write (smoothed, or the oldest still waiting, and decaying to zero
// once nothing arrives): the measure of how far behind the host is. A slow write path shows
// here even when the slots keep the queue short.
//
// While more than RefusedShareBehind of recent heartbeats were refused or dropped, it is at
// least the wait those heartbeats would have needed (at least their deadline): a host that
// refuses heartbeats is behind however quickly it serves the others, and at a refused share
// r a worker beating three times per lease loses all three with odds r³. Averaging the refused
// with the served would let the measure dip below the brake's threshold while leases run out.
func (a *Admission) HeartbeatQueueDelay() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	// A delay measured long ago says nothing about now: it halves every second without news.
	now := a.ts.Now()
	elapsed := now.Sub(a.hbDelayAt)
	d := a.hbQueueDelay
	for i := time.Duration(0); i < elapsed/time.Second && d > 0; i++ {
		d /= 2
	}
	if share := a.cfg.RefusedShareBehind(); share > 0 {
		if refused, total := a.heartbeatsLocked(now); refused >= refusalsBehindMin && float64(refused) > share*float64(total) {
			d = max(d, a.hbLost)
		}
	}
	if a.queuedByCls[ClassHeartbeat] == 0 && elapsed > time.Second {
		return d
	}
	return max(d, a.oldestHeartbeatWaitLocked())
}

// lostWait is what a refused heartbeat counts for: its estimated wait, and at least what was
// left of its deadline (or the heartbeats' queue delay cap if it has none).
func (a *Admission) lostWait(now, deadline time.Time, hasDeadline bool, wait time.Duration) time.Duration {
	if hasDeadline {
		return max(wait, deadline.Sub(now))
	}
	return max(wait, a.maxQueueDelay(context.Background(), ClassHeartbeat, false))
}

// Queued returns the calls waiting for a slot and their payload bytes, host-wide.
func (a *Admission) Queued() (calls, bytes int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queued, a.queuedBytes
}

func (a *Admission) oldestHeartbeatWaitLocked() time.Duration {
	now := a.ts.Now()
	var oldest time.Duration
	for _, g := range a.gates {
		if q := g.waiting[ClassHeartbeat]; len(q) > 0 {
			oldest = max(oldest, now.Sub(q[0].enqueued))
		}
	}
	return oldest
}

// stillBehindLocked records a heartbeat refused or dropped because the host is behind: it
// counts as a heartbeat that waited wait (its estimated or actual wait), and in any case keeps
// the measure from decaying; without it, a host that refuses every heartbeat would look idle,
// and caught up. lost (at least what was left of its deadline) is what it counts for while
// refusals are a real share of the recent heartbeats (HeartbeatQueueDelay): counted always,
// a few refusals in a busy second read as seconds behind.
func (a *Admission) stillBehindLocked(class AdmissionClass, wait, lost time.Duration) {
	if class != ClassHeartbeat {
		return
	}
	if wait > 0 {
		a.hbQueueDelay += (wait - a.hbQueueDelay) / 20
	}
	if lost > 0 {
		a.hbLost += (lost - a.hbLost) / 20
	}
	a.hbDelayAt = a.ts.Now()
	a.countHeartbeatsLocked(a.hbDelayAt, 1, true)
}

// countHeartbeatsLocked counts n heartbeats served or refused in their second.
func (a *Admission) countHeartbeatsLocked(now time.Time, n int, refused bool) {
	second := now.Unix()
	c := a.hbCounts.at(second)
	if c.second != second {
		*c = heartbeatCount{second: second}
	}
	if refused {
		c.refused += n
	} else {
		c.served += n
	}
}

// heartbeatsLocked returns the heartbeats refused and all heartbeats of the last
// refusalWindow seconds.
func (a *Admission) heartbeatsLocked(now time.Time) (refused, total int) {
	second := now.Unix()
	for s := second - refusalWindow + 1; s <= second; s++ {
		if c := a.hbCounts.at(s); c.second == s {
			refused += c.refused
			total += c.served + c.refused
		}
	}
	return refused, total
}

// heartbeatRing holds the heartbeats served and refused in each of the last heartbeatRecord
// seconds, a second in the slot at picks for it: this host's (Admission) or one another host
// of its cluster reported (ClusterLoad).
type heartbeatRing [heartbeatRecord]heartbeatCount

// at is the slot second uses; it holds that second's counts only if its second field says so.
func (r *heartbeatRing) at(second int64) *heartbeatCount {
	return &r[(second%heartbeatRecord+heartbeatRecord)%heartbeatRecord]
}

// each calls f with the counts of each second of [first, last] that saw heartbeats, oldest
// first.
func (r *heartbeatRing) each(first, last int64, f func(heartbeatCount)) {
	for s := first; s <= last; s++ {
		if c := r.at(s); c.second == s && c.served+c.refused > 0 {
			f(*c)
		}
	}
}

// refusedShare is the share of its heartbeats c refused.
func (c heartbeatCount) refusedShare() float64 {
	return float64(c.refused) / float64(c.served+c.refused)
}

// RefusedShare implements admission.LoadSignal: the mean, over the seconds of [from, to) in
// which the host served or refused heartbeats, of the share it refused (or dropped past their
// deadline) in each. A worker that sent one heartbeat at a time it did not choose by the
// host's load had it refused with these odds. Unknown (false) if the host's record does not
// reach back to from (it started later, or the second is older than its record), or no second
// of the span saw a heartbeat.
func (a *Admission) RefusedShare(from, to time.Time) (float64, bool) {
	var sum float64
	seconds := 0
	a.eachShare(from, to, func(_ int64, share float64) {
		sum += share
		seconds++
	})
	if seconds == 0 {
		return 0, false
	}
	return sum / float64(seconds), true
}

// eachShare calls f with the share of heartbeats the host refused in each second of [from, to)
// in which it served or refused any, oldest first; none if its record does not reach back to
// from. The expiry brake of a cluster's host weighs these with the other hosts' (ClusterLoad).
func (a *Admission) eachShare(from, to time.Time, f func(second int64, share float64)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	first, last, now := from.Unix(), to.Add(-time.Nanosecond).Unix(), a.ts.Now().Unix()
	if first < a.recordFrom || first <= now-heartbeatRecord || last < first {
		return
	}
	a.hbCounts.each(first, min(last, now), func(c heartbeatCount) { f(c.second, c.refusedShare()) })
}

// report is what this host tells the other hosts of its cluster about its load (ClusterLoad):
// how far behind it is now, and its heartbeat counts of the last loadReportSeconds seconds.
func (a *Admission) report() loadReport {
	delay := a.HeartbeatQueueDelay()
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.ts.Now().Unix()
	r := loadReport{Delay: int64(delay), From: a.recordFrom}
	if !a.retriesUntil.IsZero() {
		r.RetriesUntil = a.retriesUntil.UnixNano()
	}
	a.hbCounts.each(max(now-loadReportSeconds+1, a.recordFrom), now, func(c heartbeatCount) {
		r.Counts = append(r.Counts, [3]int64{c.second, int64(c.served), int64(c.refused)})
	})
	return r
}

func (a *Admission) noteQueueDelay(class AdmissionClass, d time.Duration) {
	if class != ClassHeartbeat {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// Exponentially smoothed over roughly the last 20 heartbeats.
	a.hbQueueDelay += (d - a.hbQueueDelay) / 20
	a.hbDelayAt = a.ts.Now()
	a.countHeartbeatsLocked(a.hbDelayAt, 1, false)
}

// EstimatedWait is how long a heartbeat or registration arriving now would wait for a slot:
// the writes queued host-wide, spread over every shard's slots, each taking the host's
// measured service time. Read without a lock, on every call, by the frontend's early refusal.
func (a *Admission) EstimatedWait() time.Duration { return time.Duration(a.writeWait.Load()) }

// updateWriteWaitLocked recomputes EstimatedWait and WaitBehind's pace after the queue or the
// service time changed; limit is the in-flight limit per shard the caller already holds.
func (a *Admission) updateWriteWaitLocked(limit int) {
	slots := max(1, len(a.gates)*limit)
	perWrite := int64(a.writeService) / int64(slots)
	a.slots.Store(int64(slots))
	a.perWrite.Store(perWrite)
	queued := a.queuedByCls[ClassHeartbeat] + a.queuedByCls[ClassRegistration]
	a.writeWait.Store(int64(queued) * perWrite)
}

// WaitBehind is how long a write would wait behind n writes on their way to this host: the
// slots take the first of them at once, and each of the rest adds the service time spread over
// the slots. Read without a lock, on every call, by the frontend's early refusal.
func (a *Admission) WaitBehind(n int) time.Duration {
	ahead := int64(n) - a.slots.Load()
	if ahead <= 0 {
		return 0
	}
	return time.Duration(ahead * a.perWrite.Load())
}

// RefusedEarly counts n heartbeats refused before they reached history (the frontend's early
// refusal), each having lost lost (what was left of its deadline), like those admission
// refuses itself: the expiry brake must see every refused heartbeat, wherever it was refused.
func (a *Admission) RefusedEarly(n int, lost time.Duration) {
	if n <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.ts.Now()
	if lost > 0 {
		// Smoothed as if each had been refused here, a step per refusal (at most 20 steps:
		// the average then stands at lost).
		for i := 0; i < min(n, 20); i++ {
			a.hbLost += (lost - a.hbLost) / 20
		}
	}
	a.hbDelayAt = now
	a.countHeartbeatsLocked(now, n, true)
}

// RetriedEarly notes heartbeats refused before they reached history that their callers will
// send again, within left: they are not counted as refused (a burst of them is no lost
// heartbeat), but until then a worker's heartbeats may still be on their way.
func (a *Admission) RetriedEarly(left time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if until := a.ts.Now().Add(left); until.After(a.retriesUntil) {
		a.retriesUntil = until
	}
}

// RetriesPendingUntil implements admission.LoadSignal.
func (a *Admission) RetriesPendingUntil() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.retriesUntil
}

// limitLocked returns the current in-flight limit per shard.
func (a *Admission) limitLocked() int {
	return a.limit.current(a.cfg.MinInFlightPerShard(), a.cfg.MaxInFlightPerShard(), a.cfg.TargetLatency())
}

// InFlightLimit returns the current in-flight limit per shard.
func (a *Admission) InFlightLimit() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limitLocked()
}

// nothingWaitingAheadLocked: a call may take a free slot only if no call of its class or a
// higher one waits for this gate (it would overtake it).
func (a *Admission) nothingWaitingAheadLocked(g *gate, class AdmissionClass) bool {
	for c := ClassHeartbeat; c <= class; c++ {
		if len(g.waiting[c]) > 0 {
			return false
		}
	}
	return true
}

func (a *Admission) gateLocked(shardID int32) *gate {
	g, ok := a.gates[shardID]
	if !ok {
		g = &gate{service: serviceTimeInitial}
		a.gates[shardID] = g
	}
	return g
}

// releaser returns the function that frees the slot taken at start, measures the service time
// (and a heartbeat's whole time in history, from arrival), feeds the adaptive limit and hands
// free slots (one, or more if the limit grew, none if it shrank) to the next waiters, highest
// class first.
func (a *Admission) releaser(g *gate, class AdmissionClass, arrived, start time.Time) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			now := a.ts.Now()
			took := now.Sub(start)
			a.noteQueueDelay(class, now.Sub(arrived))
			a.mu.Lock()
			g.service += (took - g.service) / 10
			g.inFlight--
			if class == ClassRegistration {
				g.regInFlight--
			}
			if class != ClassRead {
				a.writers.Add(-1)
			}
			if a.queued > 0 {
				a.limit.markSaturated()
			}
			if class != ClassRead {
				a.writeService += (took - a.writeService) / 20
				// Reads do not write: their time says nothing about the store.
				a.limit.observe(now, took, a.cfg.MinInFlightPerShard(), a.cfg.MaxInFlightPerShard(), a.cfg.TargetLatency())
			}
			limit := a.limitLocked()
			for g.inFlight < limit && a.grantNextLocked(g, limit) {
			}
			a.limitGauge.Update(float64(limit))
			if class != ClassRead {
				a.updateWriteWaitLocked(limit)
			}
			a.mu.Unlock()
		})
	}
}

// registrationSlots is how many of a shard's slots registrations may hold at once: all but a
// quarter. Their creates commit behind heartbeats (persistence.GroupCommitCreateShare), and a
// burst holding every slot while it waits would leave known workers' heartbeats queued behind
// it; a quarter is plenty for heartbeats, whose updates commit first.
func registrationSlots(limit int) int { return max(1, limit-max(1, limit/4)) }

// slotFree says whether a call of class may take one of the limit slots now taken.
func (g *gate) slotFree(class AdmissionClass, limit int) bool {
	return class != ClassRegistration || g.regInFlight < registrationSlots(limit)
}

func (a *Admission) takeLocked(g *gate, class AdmissionClass) {
	g.inFlight++
	if class == ClassRegistration {
		g.regInFlight++
	}
	if class != ClassRead {
		a.writers.Add(1)
	}
}

// WritersInFlight is how many admitted calls that write (heartbeats and registrations) are
// running, host-wide: the group committer waits for their writes to batch them together
// (persistence.GroupCommitter.ExpectWritesFrom).
func (a *Admission) WritersInFlight() int { return int(a.writers.Load()) }

// grantNextLocked gives a slot of g to its oldest waiter of the highest class that may take
// one, if any.
func (a *Admission) grantNextLocked(g *gate, limit int) bool {
	for c := ClassHeartbeat; c < numClasses; c++ {
		if len(g.waiting[c]) == 0 || !g.slotFree(c, limit) {
			continue
		}
		w := g.waiting[c][0]
		g.waiting[c][0] = nil
		g.waiting[c] = g.waiting[c][1:]
		a.dequeuedLocked(w, limit)
		w.granted = true
		a.takeLocked(g, c)
		close(w.ready)
		return true
	}
	return false
}

func (a *Admission) removeWaiterLocked(g *gate, w *waiter) {
	q := g.waiting[w.class]
	for i, x := range q {
		if x == w {
			copy(q[i:], q[i+1:])
			q[len(q)-1] = nil
			g.waiting[w.class] = q[:len(q)-1]
			a.dequeuedLocked(w, a.limitLocked())
			return
		}
	}
}

func (a *Admission) dequeuedLocked(w *waiter, limit int) {
	a.queued--
	a.queuedBytes -= w.bytes
	a.queuedByCls[w.class]--
	a.queueChangedLocked(limit)
}

// queueChangedLocked publishes the queue after it changed: its gauges, and EstimatedWait.
func (a *Admission) queueChangedLocked(limit int) {
	a.queuedGauge.Update(float64(a.queued))
	a.queuedBytesGauge.Update(float64(a.queuedBytes))
	a.updateWriteWaitLocked(limit)
	switch waiting := a.queuedByCls[ClassHeartbeat]+a.queuedByCls[ClassRegistration] > 0; {
	case waiting && a.callsDrained == nil:
		a.callsDrained = make(chan struct{})
	case !waiting && a.callsDrained != nil:
		close(a.callsDrained)
		a.callsDrained = nil
	}
}

// YieldToCalls returns once no heartbeat or registration waits for a slot, or after most,
// whichever comes first (at once when none waits, or when ctx ends). The history host's
// background deliveries (the outbound queues) call it before they start, so that while the
// host is behind on its calls the cores and the store go to the callers first; most bounds
// the delay, so background work still runs while calls queue without end (an overload).
func (a *Admission) YieldToCalls(ctx context.Context, most time.Duration) {
	a.mu.Lock()
	drained := a.callsDrained
	a.mu.Unlock()
	if drained == nil || most <= 0 {
		return
	}
	start := a.ts.Now()
	timeout, t := a.ts.NewTimer(most)
	defer t.Stop()
	select {
	case <-drained:
	case <-timeout:
	case <-ctx.Done():
	}
	a.yieldDelay.Record(a.ts.Now().Sub(start))
}

// paceRegistration takes a token from the registration bucket, waiting for it when the wait
// still leaves time to serve the call before its deadline, refusing otherwise.
func (a *Admission) paceRegistration(ctx context.Context, now, deadline time.Time, hasDeadline bool, shardID int32) error {
	a.mu.Lock()
	rps := a.cfg.RegistrationAdmitRPS()
	if rps <= 0 {
		a.mu.Unlock()
		return nil
	}
	if a.regLimiter == nil || rps != a.regRate {
		// Burst: one second's worth, at least one.
		a.regLimiter = rate.NewLimiter(rate.Limit(rps), max(1, int(rps)))
		a.regRate = rps
	}
	service := a.gateLocked(shardID).service
	r := a.regLimiter.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if !r.OK() || (hasDeadline && now.Add(delay+service).After(deadline)) {
		r.CancelAt(now)
		a.mu.Unlock()
		a.countShed(ClassRegistration)
		return exhausted(fmt.Sprintf("registrations are admitted at %g/s (history.registrationAdmitRPS); retry later", rps))
	}
	a.mu.Unlock()
	if delay <= 0 {
		return nil
	}
	a.pacingDelay.Record(delay)
	timerC, timer := a.ts.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timerC:
		return nil
	case <-ctx.Done():
		a.countDropped(ClassRegistration)
		return callerGone(ctx)
	}
}

func (a *Admission) countShed(class AdmissionClass)    { a.shed[class].Inc(1) }
func (a *Admission) countDropped(class AdmissionClass) { a.dropped[class].Inc(1) }

func exhausted(msg string) error {
	return serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_SYSTEM_OVERLOADED, msg)
}

func callerGone(ctx context.Context) error {
	if ctx.Err() == context.Canceled {
		return serviceerror.NewCanceled("the caller went away before history served the call")
	}
	return serviceerror.NewDeadlineExceeded("the call's deadline passed before history could serve it")
}
