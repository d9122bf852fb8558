package activity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/shard"
)

// RequeueDispatched hands matching again every attempt that was queued there before a restart.
// Matching keeps its queues in memory only; history is the source of truth, so on start the
// server walks the SCHEDULED activities of each namespace and re-queues those already
// dispatched (the others still have their DispatchTask pending and dispatch themselves).
// "Dispatched" includes a rescheduled attempt whose dispatch was recorded in the reschedule's
// own transaction, to be handed to matching right after its commit: whether or not the
// process lived long enough to hand it over, it is queued here (see
// Handler.RescheduleActivities). It returns how many it re-queued.
func RequeueDispatched(ctx context.Context, lister chasm.Lister, registry *chasm.Registry, namespaceIDs []string, d Dispatcher) (int, error) {
	return RequeueDispatchedWhere(ctx, lister, registry, namespaceIDs, nil, d)
}

// RequeueDispatchedWhere is RequeueDispatched restricted to the activities for which owned
// returns true (nil: all). In a cluster each host re-queues those of the shards it owns.
//
// An attempt matching refuses (its queue's owner is unreachable, or full) does not stop the
// scan: the others are still queued, and the error returned is a *RequeueError.
func RequeueDispatchedWhere(ctx context.Context, lister chasm.Lister, registry *chasm.Registry, namespaceIDs []string,
	owned func(chasm.ExecutionKey) bool, d Dispatcher,
) (int, error) {
	requeued := 0
	var refused *RequeueError
	for _, ns := range namespaceIDs {
		var token []byte
		for {
			page, next, err := chasm.ListComponents[*Activity](ctx, lister, registry, ns,
				chasm.IndexedFields{Status: StatusName(statusScheduled)}, 1000, token)
			if err != nil {
				return requeued, fmt.Errorf("list scheduled activities of namespace %s: %w", ns, err)
			}
			for _, l := range page {
				a := l.Component
				if a.Status != statusScheduled || a.DispatchedStamp < a.Stamp {
					continue
				}
				if owned != nil && !owned(l.Key) {
					continue
				}
				if err := d.AddActivityTask(ctx, activityTaskRef(l.Key, a)); err != nil {
					if ctx.Err() != nil {
						return requeued, ctx.Err()
					}
					if refused == nil {
						refused = &RequeueError{First: err}
					}
					refused.Refused++
					continue
				}
				requeued++
			}
			if token = next; token == nil {
				break
			}
		}
	}
	if refused != nil {
		return requeued, refused
	}
	return requeued, nil
}

// RequeueError reports the attempts matching refused during a re-queue scan. They stay
// SCHEDULED in history: a later scan, or their RedispatchTask, queues them.
type RequeueError struct {
	Refused int
	First   error
}

func (e *RequeueError) Error() string {
	return fmt.Sprintf("matching refused %d re-queued activities, the first with: %v", e.Refused, e.First)
}

func (e *RequeueError) Unwrap() error { return e.First }

// OwnedShards returns the filter of the activities whose history shard the monitor's host owns
// by membership.AssignShards over the current members. A host that sees no member (not even
// itself) is taken as owning every shard, as a single host does.
func OwnedShards(numShards int32, monitor membership.Monitor) func(chasm.ExecutionKey) bool {
	members := monitor.Members()
	if len(members) == 0 {
		return nil
	}
	assignment := membership.AssignShards(numShards, members)
	self := monitor.Self().ID
	return func(key chasm.ExecutionKey) bool {
		return assignment[shard.ForKey(key.NamespaceID, key.BusinessID, numShards)] == self
	}
}

// Defaults of MembershipRequeuer.
const (
	// RequeueDebounceDefault is how long members must stay unchanged before the re-queue scan
	// runs: a rolling restart moves ownership several times in a few seconds, and one scan after
	// it settles does the work of all.
	RequeueDebounceDefault = time.Second
	// RequeueMaxDelayDefault bounds the debounce: under constant churn a scan still runs this
	// long after the first change.
	RequeueMaxDelayDefault = 5 * time.Second
	// RequeueRetryDefault is how long after a failed scan the next one starts.
	RequeueRetryDefault = 5 * time.Second
)

// MembershipRequeuerParams configures a MembershipRequeuer. Zero durations take the defaults.
type MembershipRequeuerParams struct {
	Lister       chasm.Lister
	Registry     *chasm.Registry
	NamespaceIDs func() []string
	NumShards    int32
	Monitor      membership.Monitor
	Dispatcher   Dispatcher
	TimeSource   clock.TimeSource
	Debounce     time.Duration
	MaxDelay     time.Duration
	Retry        time.Duration
	Logger       *zap.Logger
	Scope        tally.Scope
	// Scanned, when set (tests), is called after every scan with its result.
	Scanned func(requeued int, err error)
}

// MembershipRequeuer re-queues, after every change of cluster members, the dispatched
// SCHEDULED activities of the shards this host owns. A membership change moves task queues to
// other hosts: a live previous owner hands its queued tasks over, but a dead one took them with
// it, and a hand-over is best effort. Matching deduplicates by stamp, so re-queuing what is
// still queued costs nothing but the scan.
type MembershipRequeuer struct {
	p        MembershipRequeuerParams
	requeued tally.Counter

	startOnce, stopOnce sync.Once
	stopCh, done        chan struct{}
	retry               chan struct{}
}

// NewMembershipRequeuer returns a requeuer; Start runs it.
func NewMembershipRequeuer(p MembershipRequeuerParams) *MembershipRequeuer {
	if p.TimeSource == nil {
		p.TimeSource = clock.NewRealTimeSource()
	}
	if p.Debounce <= 0 {
		p.Debounce = RequeueDebounceDefault
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = RequeueMaxDelayDefault
	}
	if p.Retry <= 0 {
		p.Retry = RequeueRetryDefault
	}
	if p.Logger == nil {
		p.Logger = zap.NewNop()
	}
	if p.Scope == nil {
		p.Scope = tally.NoopScope
	}
	return &MembershipRequeuer{
		p:        p,
		requeued: ActivityAttemptsRequeued.With(p.Scope, metrics.KindTag("membership_change")),
		stopCh:   make(chan struct{}),
		done:     make(chan struct{}),
		retry:    make(chan struct{}, 1),
	}
}

// Retry asks for a scan soon (after RequeueRetryDefault), as after a change of members: for a
// scan that failed elsewhere, such as the one at start.
func (r *MembershipRequeuer) Retry() {
	select {
	case r.retry <- struct{}{}:
	default:
	}
}

// Start subscribes to the monitor and runs the scans in the background.
func (r *MembershipRequeuer) Start() {
	r.startOnce.Do(func() {
		ch, unsubscribe := r.p.Monitor.Subscribe()
		go r.run(ch, unsubscribe)
	})
}

// Stop ends the loop, cancelling a scan in progress, and waits for it.
func (r *MembershipRequeuer) Stop() {
	r.stopOnce.Do(func() {
		close(r.stopCh)
		r.startOnce.Do(func() { close(r.done) }) // never started
		<-r.done
	})
}

func (r *MembershipRequeuer) run(changes <-chan struct{}, unsubscribe func()) {
	defer close(r.done)
	defer unsubscribe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-r.stopCh
		cancel()
	}()
	for {
		select {
		case <-r.stopCh:
			return
		case <-changes:
			if !r.settle(changes) {
				return
			}
		case <-r.retry:
			if !r.sleep(r.p.Retry) {
				return
			}
		}
		for {
			n, err := RequeueDispatchedWhere(ctx, r.p.Lister, r.p.Registry, r.p.NamespaceIDs(),
				OwnedShards(r.p.NumShards, r.p.Monitor), r.p.Dispatcher)
			r.requeued.Inc(int64(n))
			if r.p.Scanned != nil {
				r.p.Scanned(n, err)
			}
			if err == nil {
				if n > 0 {
					r.p.Logger.Info("re-queued dispatched activities after a membership change", zap.Int("activities", n))
				}
				break
			}
			if ctx.Err() != nil {
				return
			}
			r.p.Logger.Warn("re-queue after a membership change failed; trying again", zap.Int("requeued", n), tag.Error(err))
			if !r.sleep(r.p.Retry) {
				return
			}
		}
	}
}

// settle waits until members have not changed for Debounce, or MaxDelay since the first
// change; false if stopped meanwhile.
func (r *MembershipRequeuer) settle(changes <-chan struct{}) bool {
	deadline := r.p.TimeSource.Now().Add(r.p.MaxDelay)
	for {
		wait := min(r.p.Debounce, deadline.Sub(r.p.TimeSource.Now()))
		if wait <= 0 {
			return true
		}
		timerC, timer := r.p.TimeSource.NewTimer(wait)
		select {
		case <-r.stopCh:
			timer.Stop()
			return false
		case <-changes:
			timer.Stop()
		case <-timerC:
			return true
		}
	}
}

// sleep waits d; false if stopped meanwhile.
func (r *MembershipRequeuer) sleep(d time.Duration) bool {
	timerC, timer := r.p.TimeSource.NewTimer(d)
	defer timer.Stop()
	select {
	case <-r.stopCh:
		return false
	case <-timerC:
		return true
	}
}
