package worker

import (
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/memrelease"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/overload"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// ExpiryBrake is consulted by the lease-expiry executor once a worker's lease has run out.
// It only reads what it is told and its own memory, so the executor stays a pure task.
type ExpiryBrake interface {
	// Hold reports whether this expiry must wait; if held, the executor declines to run
	// (chasm.DeferTask) and is offered again at recheck. lease is the worker's lease length.
	Hold(namespaceID, namespace, instanceKey string, deadline, now time.Time, lease time.Duration) (recheck time.Time, held bool)
}

// bulkHold is the part of a brake that holds every expiry at once, without the worker (the
// lease-expiry task's gate); Brake has it.
type bulkHold interface {
	HoldAll(key chasm.ExecutionKey, now time.Time) (time.Time, bool)
}

// LoadSignal tells the brake whether the host, or another of its cluster, is behind (the
// host's overload controller).
type LoadSignal = overload.Signal

// BrakeReason names why the brake is on.
const (
	BrakeReasonBehind = "server-behind"
	BrakeReasonShare  = "mass-expiry"
)

// BrakeConfig is what the brake reads at use time.
type BrakeConfig struct {
	Cooldown      func() time.Duration
	Recheck       func() time.Duration
	Threshold     func(namespace string) float64
	Window        func(namespace string) time.Duration
	MinExpiries   func(namespace string) int
	SecondaryRate func(namespace string) float64
}

// NewBrakeConfig reads the settings from dynamic config.
func NewBrakeConfig(dc *dynamicconfig.Collection) BrakeConfig {
	return BrakeConfig{
		Cooldown:      dynamicconfig.ExpiryBrakeCooldown.Get(dc),
		Recheck:       dynamicconfig.ExpiryBrakeRecheck.Get(dc),
		Threshold:     dynamicconfig.ExpiryBrakeThreshold.Get(dc),
		Window:        dynamicconfig.ExpiryBrakeWindow.Get(dc),
		MinExpiries:   dynamicconfig.ExpiryBrakeMinExpiries.Get(dc),
		SecondaryRate: dynamicconfig.ExpiryBrakeSecondaryRate.Get(dc),
	}
}

// BrakeStatus is the brake as the liveness view shows it, for one namespace.
type BrakeStatus struct {
	Engaged bool
	// Reasons: BrakeReasonBehind (host-wide), BrakeReasonShare (this namespace).
	Reasons []string
	// Since is when the earliest of the reasons engaged.
	Since time.Time
	// Held is how many of the namespace's expiries are being held back.
	Held int
}

// Brake defers lease expiries while they are more likely the server's fault than the
// workers', on two rules that etcd and Kubernetes use for the same problem:
//
//   - the host is behind (overload.Signal: its heartbeats wait long, or a share of them is
//     refused, on this host or another of its cluster). Every expiry waits while it is, and
//     history.expiryBrakeCooldown after, so that a passing dip does not flap the rule. A
//     lease's clock stops for that time, as etcd's leases do while there is no leader: a lease
//     runs out only once its worker has been silent for a whole lease of the host's normal
//     service, so a worker whose heartbeats were refused still has the rest of its lease to get
//     one through. A death during an overload is found after its lease plus the time the host
//     spent behind within it: when the overload ends, or, if the host keeps falling behind
//     and catching up, once the times between add up to a lease;
//   - a mass expiry: more than worker.expiryBrakeThreshold of a namespace's ACTIVE workers on
//     this host are running out of lease (at least worker.expiryBrakeMinExpiries of them),
//     Kubernetes' unhealthyZoneThreshold. Then only worker.expiryBrakeSecondaryRate expiries
//     per second still run (its secondary eviction rate), oldest first, and only of workers
//     silent for worker.expiryBrakeWindow beyond their deadline, whose heartbeats can no
//     longer be on their way. The rule is not judged while the host is behind, nor for the
//     longest lease after: the host's own refusals make many live workers overdue then, and
//     the first rule holds their expiries (their leases' clocks stood still).
//
// A worker is running out of lease once it is overdue, that is once less than a third of its
// lease is left without a heartbeat (with the usual lease of three intervals: it missed a
// whole beat), or once its expiry has been offered within worker.expiryBrakeWindow. The brake
// sees every committed lease (its commit observer), so a mass silence shows whole at its
// first expiry: each silent worker is overdue by then. A restart or shard move is covered by
// the timer queue's restart grace (history.leaseExpiryGraceAfterRestart). Held expiries are
// offered again on a grid of history.expiryBrakeRecheck, so when the brake comes off they run
// together, oldest first.
type Brake struct {
	cfg    BrakeConfig
	load   LoadSignal
	ts     clock.TimeSource
	scope  tally.Scope
	logger *zap.Logger
	// deferredBehind and deferredShare count deferrals by reason, looked up once: every held
	// expiry counts at every offer, thousands a second on a host that is behind.
	deferredBehind, deferredShare tally.Counter

	mu          sync.Mutex
	behindOn    bool
	behindSince time.Time
	behindUntil time.Time
	// behindOffAt is when the host last caught up (the behind rule came off).
	behindOffAt time.Time
	// behindTimes are the times the host was behind (cooldown included), oldest first, as
	// long as a lease can still reach back to them (pruneBehindTimesLocked); longestLease is
	// the longest lease the brake has seen committed, which bounds that.
	behindTimes  []behindTime
	longestLease time.Duration
	namespaces   map[string]*namespaceBrake

	stop chan struct{}
	done chan struct{}
}

type namespaceBrake struct {
	name string
	// leases are the ACTIVE workers whose leases this host committed, by instance key.
	leases     map[string]trackedLease
	leasesPeak int
	// expiring and tracked are the last count of the share rule (countLocked), taken at
	// countedAt and exact until countedAt + countedFor (its countLookahead).
	expiring, tracked int
	countedAt         time.Time
	countedFor        time.Duration
	// longestLease is the longest lease among the records at the last count.
	longestLease time.Duration
	// candidates are the workers whose lease ran out within the window, by instance key.
	candidates     map[string]*expiryCandidate
	candidatesPeak int
	prunedAt       time.Time
	shareOn        bool
	shareSince     time.Time
	secondary      *rate.Limiter
	secRate        float64
}

// behindTime is one time the host was behind, from when the behind rule came on to the end of
// its cooldown.
type behindTime struct{ start, end time.Time }

// maxBehindTimes bounds behindTimes on a host that keeps falling behind: past it, the two
// oldest are merged, their gap counted as behind, which only holds expiries longer.
const maxBehindTimes = 256

// trackedLease is a worker's lease as last committed, in Unix nanoseconds.
type trackedLease struct {
	// overdue is when less than a third of the lease is left without a heartbeat. The record
	// counts until deadline + window: by then its expiry either ran (and dropped the record),
	// or is held and counted as a candidate, or the worker's shard moved to another host.
	overdue, deadline int64
}

// lease is the length of the lease, from its overdue point (a third of it before the deadline).
func (l trackedLease) lease() time.Duration { return 3 * time.Duration(l.deadline-l.overdue) }

// countLookahead is how long a count of the share rule over n records is reused: it counts
// the workers that will be overdue by then, which a live worker (overdue an interval after its
// heartbeat is due) never is. It grows with the records the count walks, countLookaheadPer
// each, from countLookaheadMin to countLookaheadMax, so that counting stays a small share of
// a core however large the namespace (a walk of 100,000 records takes about 0.5 ms on an idle
// core, BenchmarkBrakeHoldLargeFleet, and several times that on a busy one). A host carries
// n workers only at intervals far longer than this (100,000 at 1 s would be 100,000
// heartbeats a second).
func countLookahead(n int) time.Duration {
	return min(max(time.Duration(n)*countLookaheadPer, countLookaheadMin), countLookaheadMax)
}

const (
	countLookaheadPer = 10 * time.Microsecond
	countLookaheadMin = 100 * time.Millisecond
	countLookaheadMax = 2 * time.Second
)

// leaseRecordsPruneEvery is how often records of workers that left unseen (their shard moved
// to another host) are dropped when no expiry asks for a count.
const leaseRecordsPruneEvery = time.Minute

type expiryCandidate struct {
	firstSeen, lastSeen time.Time
	held                bool
	// settled, when set, is when the expiry may run: a suspect worker (NoteSuspect) was
	// counted when its suspicion began, and its grace must run out first.
	settled time.Time
}

// NewBrake returns a brake; load may be nil (no host-load trigger).
func NewBrake(cfg BrakeConfig, load LoadSignal, ts clock.TimeSource, scope tally.Scope, logger *zap.Logger) *Brake {
	return &Brake{
		cfg: cfg, load: load, ts: ts, scope: scope, logger: logger,
		deferredBehind: metrics.LeaseExpiriesDeferred.With(scope, metrics.KindTag(BrakeReasonBehind)),
		deferredShare:  metrics.LeaseExpiriesDeferred.With(scope, metrics.KindTag(BrakeReasonShare)),
		namespaces:     make(map[string]*namespaceBrake),
		stop:           make(chan struct{}), done: make(chan struct{}),
	}
}

// Hold implements ExpiryBrake.
func (b *Brake) Hold(namespaceID, namespace, instanceKey string, deadline, now time.Time, lease time.Duration) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ns := b.namespaceLocked(namespaceID, namespace)
	c := ns.candidateLocked(instanceKey, now)
	// Only this namespace, and its pruning at most once a second: Hold runs for every held
	// expiry at every recheck, so it must not walk every candidate each time.
	b.evaluateBehindLocked(now)
	b.evaluateNamespaceLocked(namespaceID, ns, now, false)

	c.held = true
	b.longestLease = max(b.longestLease, lease)
	if until, held := b.behindHoldLocked(now, deadline, lease); held {
		b.deferredBehind.Inc(1)
		return b.recheckAfter(until.Add(-time.Nanosecond)), true
	}
	if now.Before(c.settled) {
		return b.recheckAfter(c.settled.Add(-time.Nanosecond)), true
	}
	recheck := b.recheckAfter(now)
	if ns.shareOn {
		if now.Sub(deadline) < b.cfg.Window(namespace) {
			// Silent for less than its lease and a window: a server that was slow or
			// overloaded a moment ago may still hold its heartbeats (they can take as long
			// as their RPC deadline). Only a longer silence is released at the secondary rate.
			b.deferredShare.Inc(1)
			return recheck, true
		}
		rps := b.cfg.SecondaryRate(namespace)
		if ns.secondary == nil || ns.secRate != rps {
			ns.secondary = rate.NewLimiter(rate.Limit(rps), 1)
			ns.secRate = rps
		}
		if rps <= 0 || !ns.secondary.AllowN(now, 1) {
			b.deferredShare.Inc(1)
			return recheck, true
		}
	}
	c.held = false
	return time.Time{}, false
}

// behindHoldLocked says whether the behind rule holds the expiry of a lease that ends at
// deadline, and until when at least: while the host is behind, the end of its cooldown; after,
// the deadline moved by the time the host was behind since the lease began (its clock stopped
// then).
func (b *Brake) behindHoldLocked(now, deadline time.Time, lease time.Duration) (time.Time, bool) {
	if b.behindOn {
		return b.behindUntil, true
	}
	if until := deadline.Add(b.behindWithinLocked(deadline.Add(-lease), now)); now.Before(until) {
		return until, true
	}
	return time.Time{}, false
}

// behindWithinLocked is how long the host was behind between from and to.
func (b *Brake) behindWithinLocked(from, to time.Time) time.Duration {
	var d time.Duration
	for i := len(b.behindTimes) - 1; i >= 0; i-- {
		bt := b.behindTimes[i]
		if !bt.end.After(from) {
			break
		}
		start, end := bt.start, bt.end
		if start.Before(from) {
			start = from
		}
		if end.After(to) {
			end = to
		}
		if end.After(start) {
			d += end.Sub(start)
		}
	}
	return d
}

// pruneBehindTimesLocked forgets the times behind that no lease reaches back to: a lease that
// began before such a time has had a whole longest lease of normal service since, and has run
// out whatever came before.
func (b *Brake) pruneBehindTimesLocked(now time.Time) {
	served := time.Duration(0) // normal service from the end of behindTimes[i] to now
	next := now
	for i := len(b.behindTimes) - 1; i >= 0; i-- {
		served += next.Sub(b.behindTimes[i].end)
		if served >= b.longestLease {
			b.behindTimes = b.behindTimes[i+1:]
			return
		}
		next = b.behindTimes[i].start
	}
}

// HoldAll reports whether the lease expiry of the worker at key must wait whatever its worker's
// state says: the behind rule holds it (with the worker's lease as this host last committed
// it), or the namespace's share rule does (holdForShareLocked). It is the lease-expiry task's
// gate (chasm.WithGate): while it holds, expiries are deferred without their workers being
// loaded, which a host that is behind cannot afford for every held expiry at every recheck.
// Expiries it lets through still go through Hold, with the worker's own lease.
func (b *Brake) HoldAll(key chasm.ExecutionKey, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.evaluateBehindLocked(now)
	ns := b.namespaceLocked(key.NamespaceID, "")
	l, known := ns.leases[key.BusinessID]
	// Heartbeats renewed the lease since the timer was armed: the timer only re-arms (the
	// executor), it is no expiry to count as one.
	renewed := known && l.deadline > now.UnixNano()
	var until time.Time
	switch {
	case b.behindOn && renewed && !ns.suspectLocked(key.BusinessID):
		// A live worker's timer (heartbeats renewed its lease since it was armed, maybe only
		// in memory) comes back at its lease's deadline, as its executor would have it wait:
		// the timers of a live fleet stay spread over their deadlines, instead of all coming
		// back on the tick the brake comes off, when the host has only just caught up. One
		// that finds its lease not renewed then is held until the brake could be off. A
		// suspect worker's waits for that too: its grace is judged when the hold ends.
		return b.recheckAfter(time.Unix(0, l.deadline).Add(-time.Nanosecond)), true
	case b.behindOn:
		until = b.behindUntil
	case renewed:
		return time.Time{}, false
	case known:
		var held bool
		if until, held = b.behindHoldLocked(now, time.Unix(0, l.deadline), l.lease()); !held {
			return b.holdForShareLocked(key.NamespaceID, ns, key.BusinessID, l, now)
		}
	default:
		return time.Time{}, false
	}
	if !renewed {
		ns.candidateLocked(key.BusinessID, now).held = true
		b.deferredBehind.Inc(1)
	}
	// Its re-arm, or its expiry, waits until the brake could let it through; on the grid, so
	// that the held expiries come back together.
	return b.recheckAfter(until.Add(-time.Nanosecond)), true
}

// holdForShareLocked holds, for HoldAll, the expiries Hold would hold for the share rule: the
// rule is on, and the worker (its lease known here) has been silent for less than a window past
// its deadline. They come back at every recheck, as from Hold, so that they run together
// when the rule comes off. Longer silences go to Hold, for the secondary rate.
func (b *Brake) holdForShareLocked(namespaceID string, ns *namespaceBrake, instanceKey string, l trackedLease, now time.Time) (time.Time, bool) {
	b.evaluateNamespaceLocked(namespaceID, ns, now, false)
	if !ns.shareOn || now.Sub(time.Unix(0, l.deadline)) >= b.cfg.Window(ns.name) {
		return time.Time{}, false
	}
	ns.candidateLocked(instanceKey, now).held = true
	b.deferredShare.Inc(1)
	return b.recheckAfter(now), true
}

// NoteSuspect counts a worker under connection suspicion as expiring from since: a burst of
// connection losses (the server's own network failing) engages the share rule when it begins,
// not when the first grace runs out. Its expiry is settled at settled (the end of its grace).
func (b *Brake) NoteSuspect(namespaceID, namespace, instanceKey string, since, settled time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ns := b.namespaceLocked(namespaceID, namespace)
	c, ok := ns.candidates[instanceKey]
	if !ok {
		c = &expiryCandidate{firstSeen: since}
		ns.candidates[instanceKey] = c
	}
	c.lastSeen, c.settled = since, settled
	b.evaluateNamespaceLocked(namespaceID, ns, since, false)
}

// ForgetSuspect stops counting a worker whose suspicion was cleared (it reconnected), unless
// its expiry is already being held.
func (b *Brake) ForgetSuspect(namespaceID, instanceKey string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ns, ok := b.namespaces[namespaceID]; ok {
		if c, ok := ns.candidates[instanceKey]; ok && !c.held {
			delete(ns.candidates, instanceKey)
		}
	}
}

// observer keeps the leases of ACTIVE workers, the share rule's base, from every committed
// change of a worker on this host: a heartbeat moves its lease, any other state drops it.
func (b *Brake) observer() chasm.CommitObserver {
	return func(c chasm.Commit) {
		a, _ := c.After.(*workerpb.WorkerState)
		if a == nil {
			return
		}
		b.noteLease(c.Key.NamespaceID, a.GetNamespace(), c.Key.BusinessID, a, c.Deleted)
	}
}

// noteLease records the committed state of one worker.
func (b *Brake) noteLease(namespaceID, namespace, instanceKey string, st *workerpb.WorkerState, deleted bool) {
	active := !deleted && st.GetStatus() == statusActive && st.GetLeaseDeadline() != nil
	b.mu.Lock()
	defer b.mu.Unlock()
	if !active {
		if ns, ok := b.namespaces[namespaceID]; ok {
			delete(ns.leases, instanceKey)
		}
		return
	}
	ns := b.namespaceLocked(namespaceID, namespace)
	deadline := st.GetLeaseDeadline().AsTime().UnixNano()
	lease := st.GetLeaseDuration().AsDuration()
	b.longestLease = max(b.longestLease, lease)
	if prev, known := ns.leases[instanceKey]; known {
		if prev.deadline == deadline {
			return // a change other than a heartbeat (a binding): the lease did not move
		}
		if b.load != nil && st.GetLastHeartbeatTime().AsTime().UnixNano() >= prev.overdue {
			// Renewed (at the heartbeat's time, which the state carries: no clock read on the
			// heartbeat path) with less than a third of its lease left: the worker's heartbeats
			// were held up for an interval on their way here, or it missed one. Enough of these
			// make the host behind before a live worker's lease runs out whole.
			b.load.RenewedLate()
		}
	}
	ns.leases[instanceKey] = trackedLease{overdue: deadline - int64(lease/3), deadline: deadline}
	// A worker that beat again is no longer running out of lease, whatever was offered
	// before: a host that was behind offered the expiries of many live workers.
	delete(ns.candidates, instanceKey)
	ns.leasesPeak = max(ns.leasesPeak, len(ns.leases))
}

// Status returns the brake as it applies to a namespace.
func (b *Brake) Status(namespaceID string) BrakeStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.evaluateLocked(b.ts.Now())
	var st BrakeStatus
	if b.behindOn {
		st.Engaged, st.Reasons, st.Since = true, append(st.Reasons, BrakeReasonBehind), b.behindSince
	}
	if ns, ok := b.namespaces[namespaceID]; ok {
		if ns.shareOn {
			if !st.Engaged || ns.shareSince.Before(st.Since) {
				st.Since = ns.shareSince
			}
			st.Engaged, st.Reasons = true, append(st.Reasons, BrakeReasonShare)
		}
		for _, c := range ns.candidates {
			if c.held {
				st.Held++
			}
		}
	}
	return st
}

// Start re-evaluates the brake every recheck interval, so that it comes off (log line and
// metric) even when no expiry asks; Stop ends that.
func (b *Brake) Start() {
	go func() {
		defer close(b.done)
		for {
			timerC, timer := b.ts.NewTimer(max(b.cfg.Recheck(), 100*time.Millisecond))
			select {
			case <-timerC:
				b.mu.Lock()
				b.evaluateLocked(b.ts.Now())
				b.mu.Unlock()
			case <-b.stop:
				timer.Stop()
				return
			}
		}
	}()
}

// Stop ends the background evaluation and waits for it.
func (b *Brake) Stop() {
	close(b.stop)
	<-b.done
}

// recheckAfter is the next tick of the recheck grid after t: every held expiry waits for the
// same ticks, so that the timer queue offers them again together, in deadline order.
func (b *Brake) recheckAfter(t time.Time) time.Time {
	step := max(b.cfg.Recheck(), time.Millisecond)
	return t.Truncate(step).Add(step)
}

// suspectLocked reports whether instanceKey is under connection suspicion (NoteSuspect).
func (ns *namespaceBrake) suspectLocked(instanceKey string) bool {
	c, ok := ns.candidates[instanceKey]
	return ok && !c.settled.IsZero()
}

// candidateLocked returns the expiry candidate of instanceKey, made first seen now if new,
// and marks it seen now.
func (ns *namespaceBrake) candidateLocked(instanceKey string, now time.Time) *expiryCandidate {
	c, ok := ns.candidates[instanceKey]
	if !ok {
		c = &expiryCandidate{firstSeen: now}
		ns.candidates[instanceKey] = c
		ns.candidatesPeak = max(ns.candidatesPeak, len(ns.candidates))
	}
	c.lastSeen = now
	return c
}

func (b *Brake) namespaceLocked(namespaceID, name string) *namespaceBrake {
	ns, ok := b.namespaces[namespaceID]
	if !ok {
		ns = &namespaceBrake{candidates: make(map[string]*expiryCandidate), leases: make(map[string]trackedLease)}
		b.namespaces[namespaceID] = ns
	}
	if name != "" {
		ns.name = name
	}
	return ns
}

func (b *Brake) evaluateLocked(now time.Time) {
	b.evaluateBehindLocked(now)
	for id, ns := range b.namespaces {
		b.evaluateNamespaceLocked(id, ns, now, true)
	}
}

func (b *Brake) evaluateBehindLocked(now time.Time) {
	if b.load != nil && b.load.Behind() {
		b.behindUntil = now.Add(b.cfg.Cooldown())
		if !b.behindOn {
			b.behindOn, b.behindSince = true, now
			metrics.ExpiryBrakeEngaged.With(b.scope, metrics.KindTag(BrakeReasonBehind), metrics.NamespaceTag("")).Update(1)
			b.logger.Warn("expiry brake on: the server (this host, or another of its cluster) is behind, lease expiries are deferred")
		}
	}
	if b.behindOn && !now.Before(b.behindUntil) {
		b.behindOn = false
		b.behindOffAt = now
		b.behindTimes = append(b.behindTimes, behindTime{start: b.behindSince, end: b.behindUntil})
		b.pruneBehindTimesLocked(now)
		if len(b.behindTimes) > maxBehindTimes {
			b.behindTimes[1].start = b.behindTimes[0].start
			b.behindTimes = b.behindTimes[1:]
		}
		metrics.ExpiryBrakeEngaged.With(b.scope, metrics.KindTag(BrakeReasonBehind), metrics.NamespaceTag("")).Update(0)
		b.logger.Info("expiry brake off: the server caught up; a deferred expiry runs once its worker has been silent for a whole lease besides the time the server was behind",
			zap.Duration("engaged-for", now.Sub(b.behindSince)))
	}
}

// evaluateNamespaceLocked prunes the namespace's candidates older than the window (always when
// force, else at most once a second) and turns the share rule on or off. The count behind the
// rule is taken only when there is something to judge: expiries offered (candidates), or the
// rule on (to see it come off).
func (b *Brake) evaluateNamespaceLocked(id string, ns *namespaceBrake, now time.Time, force bool) {
	window := b.cfg.Window(ns.name)
	if force || now.Sub(ns.prunedAt) >= time.Second {
		ns.prunedAt = now
		for key, c := range ns.candidates {
			if now.Sub(c.lastSeen) > window {
				delete(ns.candidates, key)
			}
		}
		// A mass expiry grew the map; once it has passed, give its buckets back.
		ns.candidates, _ = memrelease.ShrinkMap(ns.candidates, &ns.candidatesPeak, memrelease.ShrinkMapMin)
	}
	switch {
	case len(ns.candidates) > 0 || ns.shareOn:
		// Callers' times arrive slightly out of order (each took its own before the lock): a
		// time a little before the count is covered by it, only a clock set back is not.
		// Recounting for every earlier time recounted on nearly every concurrent Hold: a
		// large share of the core with a large fleet, while the host was behind (cost that
		// kept it behind); BenchmarkBrakeHoldLargeFleet measures a Hold.
		if now.Before(ns.countedAt.Add(-ns.countedFor)) || !now.Before(ns.countedAt.Add(ns.countedFor)) {
			b.countLocked(ns, now)
		}
	case force && now.Sub(ns.countedAt) >= leaseRecordsPruneEvery:
		b.countLocked(ns, now) // only to drop the records of workers that left unseen
		return
	default:
		return
	}
	if b.behindOn || (!b.behindOffAt.IsZero() && now.Before(b.behindOffAt.Add(ns.longestLease))) {
		// A host that is behind makes many live workers overdue itself (it refused their
		// heartbeats), and the behind rule holds their expiries (their leases' clocks stood
		// still while it was behind): judged now, the rule would turn on after every
		// overload, and its secondary rate then hold real deaths for minutes.
		return
	}
	n, base := ns.expiring, ns.tracked
	threshold := b.cfg.Threshold(ns.name)
	on := threshold < 1 && n >= b.cfg.MinExpiries(ns.name) && float64(n) > threshold*float64(max(base, n))
	if on == ns.shareOn {
		return
	}
	ns.shareOn = on
	fields := []zap.Field{
		tag.NamespaceID(id), tag.Namespace(ns.name), zap.Int("expiring", n), zap.Int("active", base),
		zap.Float64("threshold", threshold), zap.Duration("window", window),
	}
	if on {
		ns.shareSince = now
		metrics.ExpiryBrakeEngaged.With(b.scope, metrics.KindTag(BrakeReasonShare), metrics.NamespaceTag(ns.name)).Update(1)
		b.logger.Warn("expiry brake on: a large share of the namespace's workers is expiring at once; expiries deferred", fields...)
	} else {
		metrics.ExpiryBrakeEngaged.With(b.scope, metrics.KindTag(BrakeReasonShare), metrics.NamespaceTag(ns.name)).Update(0)
		b.logger.Info("expiry brake off: expiries resume oldest first",
			append(fields, zap.Duration("engaged-for", now.Sub(ns.shareSince)))...)
	}
}

// countLocked counts the namespace's workers running out of lease (overdue by now +
// countLookahead, or offered for expiry within the window) and its ACTIVE workers on this
// host, and drops the records that no longer count. It walks every record of the namespace;
// it runs at most once per countLookahead, and only while expiries are being judged.
func (b *Brake) countLocked(ns *namespaceBrake, now time.Time) {
	gone := now.Add(-b.cfg.Window(ns.name)).UnixNano() // deadlines before this no longer count
	lookahead := countLookahead(len(ns.leases) + len(ns.candidates))
	horizon := now.Add(lookahead).UnixNano()
	expiring, tracked := 0, 0
	var longest time.Duration
	for key, l := range ns.leases {
		if l.deadline <= gone {
			delete(ns.leases, key)
			continue
		}
		tracked++
		longest = max(longest, l.lease())
		if _, candidate := ns.candidates[key]; !candidate && l.overdue <= horizon {
			expiring++
		}
	}
	for key := range ns.candidates {
		if _, ok := ns.leases[key]; !ok {
			tracked++ // held long past its deadline, or known only by its suspicion
		}
	}
	expiring += len(ns.candidates)
	ns.expiring, ns.tracked, ns.countedAt, ns.countedFor = expiring, tracked, now, lookahead
	ns.longestLease = longest
	ns.leases, _ = memrelease.ShrinkMap(ns.leases, &ns.leasesPeak, memrelease.ShrinkMapMin)
}
