package worker

import (
	"math"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/admission"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/memrelease"
	"github.com/vigilhq/vigil/common/metrics"
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

// LoadSignal tells the brake how far behind the host is (the host's admission control).
type LoadSignal = admission.LoadSignal

// BrakeReason names why the brake is on.
const (
	BrakeReasonBehind = "server-behind"
	BrakeReasonShare  = "mass-expiry"
)

// BrakeConfig is what the brake reads at use time.
type BrakeConfig struct {
	QueueDelay    func() time.Duration
	Cooldown      func() time.Duration
	Recheck       func() time.Duration
	Threshold     func(namespace string) float64
	Window        func(namespace string) time.Duration
	Settle        func(namespace string) time.Duration
	MinExpiries   func(namespace string) int
	SecondaryRate func(namespace string) float64
	ReleaseOdds   func() float64
}

// NewBrakeConfig reads the settings from dynamic config.
func NewBrakeConfig(dc *dynamicconfig.Collection) BrakeConfig {
	return BrakeConfig{
		QueueDelay:    dynamicconfig.ExpiryBrakeQueueDelay.Get(dc),
		Cooldown:      dynamicconfig.ExpiryBrakeCooldown.Get(dc),
		Recheck:       dynamicconfig.ExpiryBrakeRecheck.Get(dc),
		Threshold:     dynamicconfig.ExpiryBrakeThreshold.Get(dc),
		Window:        dynamicconfig.ExpiryBrakeWindow.Get(dc),
		Settle:        dynamicconfig.ExpiryBrakeSettle.Get(dc),
		MinExpiries:   dynamicconfig.ExpiryBrakeMinExpiries.Get(dc),
		SecondaryRate: dynamicconfig.ExpiryBrakeSecondaryRate.Get(dc),
		ReleaseOdds:   dynamicconfig.ExpiryBrakeReleaseOdds.Get(dc),
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
// workers':
//
//   - the host is behind: heartbeats wait longer than history.expiryBrakeQueueDelay for a
//     slot, or more than history.expiryBrakeRefusedShare of them are refused (LoadSignal
//     folds both into one delay), and history.expiryBrakeCooldown after that stops, so that
//     workers whose heartbeats were refused get one through); after that, no lease expires
//     before a whole lease (the worker's own) has passed since the brake came off, as etcd
//     refreshes leases after a leader change: a worker beating every 30 s whose beats were
//     all refused needs up to an interval after the catch-up to get one through, and a
//     cooldown shorter than that declared thousands of live workers INACTIVE at 100,000.
//     An overload that lasts must not hide deaths for as long as it lasts, so an expiry held
//     for this reason still runs once the host's own refusals no longer explain the silence
//     (history.expiryBrakeReleaseOdds, see weighLocked). A heartbeat refused early that its
//     caller sends again (the Go SDK, which retries a refusal within its 10 s deadline) is
//     not refused in this sense: a burst of those loses nothing, and made the brake hold
//     every death for a lease after it. Only a lease shorter than 2 × admission.RetryHorizon
//     can run out while its worker's beats are still being retried; such an expiry waits
//     until they can no longer come (LoadSignal.RetriesPendingUntil, retriesPending);
//   - more than worker.expiryBrakeThreshold of a namespace's ACTIVE workers on this host are
//     running out of lease (at least worker.expiryBrakeMinExpiries of them; while the host is
//     behind, only those whose silence its refusals do not explain, see
//     evaluateNamespaceLocked); then only
//     worker.expiryBrakeSecondaryRate expiries per second still run, of workers silent for
//     longer than their lease and worker.expiryBrakeWindow: an overloaded server makes a
//     large share of its workers overdue too, and their heartbeats may still be on the way.
//
// A worker is running out of lease once it is overdue, that is once less than a third of its
// lease is left without a heartbeat (with the usual lease of three intervals: it missed a
// whole beat), or once its expiry has been offered within worker.expiryBrakeWindow. The brake
// sees every committed lease (its commit observer), so a mass silence shows whole at its
// first expiry: each silent worker is overdue by then, since its own last beat was no later
// than the last beat of the first to expire, plus an interval. No expiry need wait to see
// the others come. (worker.expiryBrakeSettle can still make every expiry wait.) A restart or
// shard move is covered by the timer queue's restart grace
// (history.leaseExpiryGraceAfterRestart). Held expiries are offered again on a grid of
// history.expiryBrakeRecheck, so when the brake comes off they run together, oldest first.
type Brake struct {
	cfg    BrakeConfig
	load   LoadSignal
	ts     clock.TimeSource
	scope  tally.Scope
	logger *zap.Logger
	// deferredBehind and deferredShare count deferrals by reason, looked up once: every held
	// expiry counts at every offer, thousands a second on a host that is behind.
	deferredBehind, deferredShare tally.Counter
	releasedOnEvidence            tally.Counter

	mu          sync.Mutex
	behindOn    bool
	behindSince time.Time
	behindUntil time.Time
	// behindOffAt is when the host last caught up (the behind rule came off).
	behindOffAt time.Time
	namespaces  map[string]*namespaceBrake

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
	// doubtful is how many candidates' silences the weighing already doubts (countLocked).
	doubtful   int
	countedAt  time.Time
	countedFor time.Duration
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

// trackedLease is a worker's lease as last committed, in Unix nanoseconds.
type trackedLease struct {
	// overdue is when less than a third of the lease is left without a heartbeat. The record
	// counts until deadline + window: by then its expiry either ran (and dropped the record),
	// or is held and counted as a candidate, or the worker's shard moved to another host.
	overdue, deadline int64
	// often: the worker's last two heartbeats were at most oftenGap of its lease apart, so a
	// live one sends a heartbeat in every half lease (weighLocked weighs its silence by halves).
	often bool
}

// oftenGap is the largest gap between two heartbeats, as a share of the lease, of a worker
// weighed by half leases: with a quarter of margin for jitter (a gap of 0.4 leases may be
// followed by one of 0.5), such a worker beats at least once in any half lease. An SDK worker
// (lease three intervals) and vigil bench's (±10 % jitter) qualify. A gap much shorter than
// the interval (a retried call committed twice) still gives half a lease, no less: the rule
// assumes that a worker seen beating that often beats at least twice per lease, as every SDK
// worker does.
const oftenGap = 0.4

// lease is the length of the lease, from its overdue point (a third of it before the deadline).
func (l trackedLease) lease() time.Duration { return 3 * time.Duration(l.deadline-l.overdue) }

// span is the length of silence in which a live worker sends at least one heartbeat.
func (l trackedLease) span() time.Duration {
	if l.often {
		return l.lease() / 2
	}
	return l.lease()
}

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
	// settled, when set, replaces firstSeen + settle: a suspect worker (NoteSuspect) was
	// counted when its suspicion began, and its grace served as the settle time.
	settled time.Time
	// The silence being weighed (weighLocked): the lease that ran out, the span in which a
	// live worker sends at least one heartbeat (its lease, or half of it), the odds so far
	// that the host refused every heartbeat of a live worker since, and the end of the spans
	// weighed so far. Zero span: not known (the brake never saw the lease committed).
	deadline time.Time
	span     time.Duration
	odds     float64
	weighed  time.Time
}

// NewBrake returns a brake; load may be nil (no host-load trigger).
func NewBrake(cfg BrakeConfig, load LoadSignal, ts clock.TimeSource, scope tally.Scope, logger *zap.Logger) *Brake {
	return &Brake{
		cfg: cfg, load: load, ts: ts, scope: scope, logger: logger,
		deferredBehind:     metrics.LeaseExpiriesDeferred.With(scope, metrics.KindTag(BrakeReasonBehind)),
		deferredShare:      metrics.LeaseExpiriesDeferred.With(scope, metrics.KindTag(BrakeReasonShare)),
		releasedOnEvidence: metrics.LeaseExpiriesReleasedOnEvidence.With(scope),
		namespaces:         make(map[string]*namespaceBrake),
		stop:               make(chan struct{}), done: make(chan struct{}),
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

	recheck := b.recheckAfter(now)
	c.held = true
	c.silence(deadline, lease, ns.spanOf(instanceKey, deadline, lease))
	// Held while the host is behind, and until a lease after it caught up: the worker has not
	// yet had a whole lease of normal service to get a heartbeat through (this holds for a
	// lease that ran out after the catch-up too: its last beats may have been the ones
	// refused). Unless the weighing proves the silence is not the host's doing.
	behind := b.behindOn || (!b.behindOffAt.IsZero() && now.Before(b.behindOffAt.Add(lease))) ||
		b.retriesPending(now, lease)
	proved := behind && b.weighLocked(c, now)
	if behind && !proved {
		b.deferredBehind.Inc(1)
		return recheck, true
	}
	settled := c.firstSeen.Add(b.cfg.Settle(namespace))
	if !c.settled.IsZero() {
		settled = c.settled
	}
	if now.Before(settled) {
		return b.recheckAfter(settled.Add(-time.Nanosecond)), true
	}
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
	if proved {
		b.releasedOnEvidence.Inc(1)
	}
	return time.Time{}, false
}

// HoldAll reports whether the lease expiry of the worker at key must wait whatever its worker's
// state says: the host is behind, or caught up less than the worker's lease ago (its lease as
// this host last committed it), or the namespace's share rule holds it (holdForShareLocked).
// It is the lease-expiry task's gate (chasm.WithGate): while it holds, expiries are deferred
// without their workers being loaded, and counted as held. They are offered again at the
// first recheck at which the brake could be off, or the weighing could release them.
// Expiries it lets through still go through Hold (with the worker's own lease, the settle
// time, the share rule). Each offer that reaches Hold costs the worker's lock, a read and a
// decode: in the 100,000-worker run, the share rule's holds re-offered that way every recheck
// were 2.1 million, thousands a second on a host that was already behind.
func (b *Brake) HoldAll(key chasm.ExecutionKey, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.evaluateBehindLocked(now)
	ns := b.namespaceLocked(key.NamespaceID, "")
	l, known := ns.leases[key.BusinessID]
	// Heartbeats renewed the lease since the timer was armed: the timer only re-arms (the
	// executor), it is no expiry to count as one.
	renewed := known && l.deadline > now.UnixNano()
	// The earliest the brake could let this expiry through without the weighing.
	var until time.Time
	switch {
	case b.behindOn:
		until = b.behindUntil
	case renewed:
		return time.Time{}, false
	case known && !b.behindOffAt.IsZero() && now.Before(b.behindOffAt.Add(l.lease())):
		until = b.behindOffAt.Add(l.lease())
	case known && b.retriesPending(now, l.lease()):
		until = b.load.RetriesPendingUntil() // asked again only when they are, which is rare
	default:
		return b.holdForShareLocked(key.NamespaceID, ns, key.BusinessID, l, known, now)
	}
	if renewed {
		// Its re-arm is a write, which can wait until the host has caught up.
		return b.recheckAfter(until.Add(-time.Nanosecond)), true
	}
	c := ns.candidateLocked(key.BusinessID, now)
	c.held = true
	if known {
		c.silence(time.Unix(0, l.deadline), l.lease(), l.span())
	}
	if b.weighLocked(c, now) {
		return time.Time{}, false // Hold weighs it again, with the worker's own lease
	}
	b.deferredBehind.Inc(1)
	// Offering the expiry again before then would only hold it again. Still on the grid, so
	// that the held expiries come back together.
	if next := b.nextWeighing(c); next.After(now) && next.Before(until) {
		until = next
	}
	from := until.Add(-time.Nanosecond)
	if from.Before(now) {
		from = now
	}
	return b.recheckAfter(from), true
}

// holdForShareLocked holds, for HoldAll, the expiries Hold would hold for the share rule: the
// rule is on, and the worker (its lease known here) has been silent for less than a window past
// its deadline. They come back at every recheck, as from Hold, so that they run together
// when the rule comes off. Longer silences go to Hold, for the secondary rate.
func (b *Brake) holdForShareLocked(namespaceID string, ns *namespaceBrake, instanceKey string, l trackedLease, known bool, now time.Time) (time.Time, bool) {
	if !known {
		return time.Time{}, false
	}
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
	prev, known := ns.leases[instanceKey]
	if known && prev.deadline == deadline {
		return // a change other than a heartbeat (a binding): the lease did not move
	}
	l := trackedLease{overdue: deadline - int64(lease/3), deadline: deadline}
	if known {
		// The gap between the heartbeats that set the two leases.
		gap := (deadline - int64(lease)) - (prev.deadline - int64(prev.lease()))
		l.often = gap > 0 && float64(gap) <= oftenGap*float64(lease)
	}
	ns.leases[instanceKey] = l
	ns.leasesPeak = max(ns.leasesPeak, len(ns.leases))
}

// spanOf is the span weighLocked weighs the silence of the worker whose lease of that length
// ran out at deadline by: half of it if the host saw the worker beating often (its record is of
// this lease), else the whole lease.
func (ns *namespaceBrake) spanOf(instanceKey string, deadline time.Time, lease time.Duration) time.Duration {
	if l, ok := ns.leases[instanceKey]; ok && l.often && l.deadline == deadline.UnixNano() {
		return lease / 2
	}
	return lease
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

// silence notes the lease whose expiry the candidate is, and the span its silence is weighed
// by: a new one (the worker beat since) starts its weighing over, from the heartbeat that set
// the lease.
//
// The span is the gap between two heartbeats of a live worker answered at once (a lease, or
// half of one), plus heldGap: a worker sends its next heartbeat only once its last one is
// answered (the SDK's heartbeat loop waits for its call, and so does vigil bench), and a host
// that is behind may hold a heartbeat that long before it answers it, served or dropped. A
// span without it would count, as a silence the host's refusals did not explain, the time a
// live worker's heartbeat sat in the host's own queue, and at twice capacity with patient
// heartbeats held close to a short lease that declared a few live workers INACTIVE.
func (c *expiryCandidate) silence(deadline time.Time, lease, span time.Duration) {
	if lease <= 0 || span <= 0 || c.deadline.Equal(deadline) {
		return
	}
	span += heldGap
	c.deadline, c.span, c.odds, c.weighed = deadline, span, 1, deadline.Add(-lease).Add(span)
}

// heldGap is the longest a host holds a heartbeat before answering it: a patient one
// (admission.WithPatience) waits for its turn until its deadline, at most
// admission.RetryHorizon, and a refused one that its caller retries is sent again until then.
const heldGap = admission.RetryHorizon

// weighLocked says whether the candidate's silence is no longer the host's doing: whether
// the odds that the host refused every heartbeat a live worker sent since its last one are
// below history.expiryBrakeReleaseOdds. A live worker sends at least one heartbeat per span
// (a lease, or it would lose its lease in good times too; half a lease if the host saw it
// beating that often, see oftenGap), at a time that does not follow the host's load; so each
// whole span since its last heartbeat multiplies the odds by the share of heartbeats the host
// refused over that span, and over the time after it by when a heartbeat sent in it was
// served or lost (answered). A span is weighed once that time has passed, so its share is
// final; the odds are kept, so each is weighed once. Refused here means lost: a heartbeat
// refused early that its caller sends again (the Go SDK) is not, its retry is counted. A span
// of which the host knows nothing (before it started, or no heartbeat at all) weighs nothing:
// it leaves the odds as they were. Weighed by halves, a silence is found in about half the
// time: at a refused share s the odds fall by s² per lease instead of s.
//
// This rests on the host's refusals falling evenly on its workers, which the early refusal
// makes them do (it refuses a share of arrivals, spread evenly). On a host of a cluster, the
// load signal is the cluster's (history.ClusterLoad): a worker's heartbeats may be refused by
// whichever host its SDK is connected to, so each second weighs at the largest share any host
// refused, and the host counts as behind while any host is.
func (b *Brake) weighLocked(c *expiryCandidate, now time.Time) bool {
	bound := b.cfg.ReleaseOdds()
	if bound <= 0 || b.load == nil || c.span <= 0 {
		return false
	}
	answered := b.answered()
	for c.odds >= bound {
		from, to := c.weighed.Add(-c.span), c.weighed
		if to.Add(answered).After(now) {
			return false
		}
		if share, known := b.load.RefusedShare(from, to.Add(answered)); known {
			c.odds *= share
		}
		c.weighed = to.Add(c.span)
	}
	return true
}

// retriesPending says whether a lease of that length that runs out now may have run out
// while its worker's heartbeats are still being retried: refused early, but by callers that
// send them again within admission.RetryHorizon, so not counted as lost (LoadSignal). Only a
// short lease can: a worker beats at least three times per lease, so one whose lease runs
// out with every beat still being retried sent none in the lease's first
// lease − RetryHorizon, more than its interval once the lease is 2 × RetryHorizon or more:
// it missed a beat that no refusal explains, or one counted as lost, which the rules above
// weigh.
func (b *Brake) retriesPending(now time.Time, lease time.Duration) bool {
	return b.load != nil && lease < 2*admission.RetryHorizon && now.Before(b.load.RetriesPendingUntil())
}

// nextWeighing is when weighLocked could next change its answer for c (its next span is
// final), or zero if it cannot weigh c.
func (b *Brake) nextWeighing(c *expiryCandidate) time.Time {
	if b.cfg.ReleaseOdds() <= 0 || b.load == nil || c.span <= 0 {
		return time.Time{}
	}
	return c.weighed.Add(b.answered())
}

// answered is how long after a heartbeat is sent the host knows whether it was served or lost:
// history.expiryBrakeCooldown, and at least admission.RetryHorizon, by when a heartbeat
// refused early and retried has been served or counted as lost.
func (b *Brake) answered() time.Duration {
	return max(b.cfg.Cooldown(), admission.RetryHorizon)
}

// recheckAfter is the next tick of the recheck grid after t: every held expiry waits for the
// same ticks, so that the timer queue offers them again together, in deadline order.
func (b *Brake) recheckAfter(t time.Time) time.Time {
	step := max(b.cfg.Recheck(), time.Millisecond)
	return t.Truncate(step).Add(step)
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
	if b.load != nil {
		if limit := b.cfg.QueueDelay(); limit > 0 {
			if delay := b.load.HeartbeatQueueDelay(); delay > limit {
				b.behindUntil = now.Add(b.cfg.Cooldown())
				if !b.behindOn {
					b.behindOn, b.behindSince = true, now
					metrics.ExpiryBrakeEngaged.With(b.scope, metrics.KindTag(BrakeReasonBehind), metrics.NamespaceTag("")).Update(1)
					b.logger.Warn("expiry brake on: the server (this host, or another of its cluster) is behind, lease expiries are deferred",
						zap.Duration("heartbeat-queue-delay", delay), zap.Duration("threshold", limit))
				}
			}
		}
	}
	if b.behindOn && !now.Before(b.behindUntil) {
		b.behindOn = false
		b.behindOffAt = now
		metrics.ExpiryBrakeEngaged.With(b.scope, metrics.KindTag(BrakeReasonBehind), metrics.NamespaceTag("")).Update(0)
		b.logger.Info("expiry brake off: the server caught up; the expiries it deferred resume, oldest first, once their workers have had a whole lease to beat",
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
	n, base := ns.expiring, ns.tracked
	catchingUp := !b.behindOffAt.IsZero() && now.Before(b.behindOffAt.Add(ns.longestLease))
	if (b.behindOn || catchingUp) && b.cfg.ReleaseOdds() > 0 {
		// A host that is behind makes many live workers overdue itself (it refused their
		// heartbeats), and the behind rule holds their expiries anyway, through the lease
		// after it caught up. What the share rule must still catch is a mass silence that the
		// refusals do not explain, before the weighing releases its first member: the workers
		// whose silence is already doubtful (odds below the square root of the release bound,
		// reached halfway to a release). Workers silenced together reach that point within
		// about a lease of each other, long before the first of them is released. Counting
		// every overdue worker in the lease after the catch-up turned the rule on after each
		// overload, and its secondary rate then held real deaths for minutes.
		n = ns.doubtful
	}
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
	doubt := math.Sqrt(b.cfg.ReleaseOdds())
	doubtful := 0
	for key, c := range ns.candidates {
		if _, ok := ns.leases[key]; !ok {
			tracked++ // held long past its deadline, or known only by its suspicion
		}
		if c.span > 0 && c.odds < doubt {
			doubtful++
		}
	}
	expiring += len(ns.candidates)
	ns.expiring, ns.tracked, ns.doubtful, ns.countedAt, ns.countedFor = expiring, tracked, doubtful, now, lookahead
	ns.longestLease = longest
	ns.leases, _ = memrelease.ShrinkMap(ns.leases, &ns.leasesPeak, memrelease.ShrinkMapMin)
}
