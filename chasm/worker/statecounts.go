package worker

import (
	"sync"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// countedStates are the states workers_by_state reports, in the order StateCount holds them.
var countedStates = [...]workerpb.WorkerStatus{statusActive, statusInactive, statusCleanedUp}

// StateCount is a namespace's worker records by state.
type StateCount struct {
	Active, Inactive, CleanedUp int64
}

// Total is the records in every state.
func (c StateCount) Total() int64 { return c.Active + c.Inactive + c.CleanedUp }

func (c *StateCount) field(s workerpb.WorkerStatus) *int64 {
	switch s {
	case statusActive:
		return &c.Active
	case statusInactive:
		return &c.Inactive
	case statusCleanedUp:
		return &c.CleanedUp
	}
	return nil
}

// StateCounts keeps each namespace's workers by state from the transitions this host commits
// (its commit observer sees every one, once durable), so workers_by_state, the expiry brake's
// ACTIVE base and worker.maxWorkersPerNamespace need no count of the store at every report.
// A recount from the store (StateGauges, at start and then slowly) replaces the counts: it
// takes in what this host cannot see (transitions committed on other hosts of a cluster, or
// before a restart).
//
// A transition that commits while a recount runs is added on top of it: the count may or may
// not have seen it, so it may be counted twice until the next recount, but it is never lost.
type StateCounts struct {
	mu     sync.Mutex
	counts map[string]*StateCount // by namespace ID
	// during, while a recount runs, collects the transitions committed meanwhile.
	during map[string]*StateCount
}

// NewStateCounts returns empty counts.
func NewStateCounts() *StateCounts {
	return &StateCounts{counts: map[string]*StateCount{}}
}

// observer is the commit observer that keeps the counts.
func (c *StateCounts) observer() chasm.CommitObserver {
	return func(commit chasm.Commit) {
		b, _ := commit.Before.(*workerpb.WorkerState)
		a, _ := commit.After.(*workerpb.WorkerState)
		if a == nil {
			return
		}
		c.Observe(commit.Key.NamespaceID, b, a, commit.Deleted)
	}
}

// Observe counts one committed change of a worker of namespaceID: its state before (nil when
// the commit created it) and after (its last state, with deleted, when the commit deleted it).
func (c *StateCounts) Observe(namespaceID string, before, after *workerpb.WorkerState, deleted bool) {
	from, to := before.GetStatus(), after.GetStatus()
	if deleted {
		if before == nil {
			from = to
		}
		to = statusUnspecified
	}
	if from == to {
		return // a heartbeat: the common case, and free
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range []map[string]*StateCount{c.counts, c.during} {
		if m == nil {
			continue
		}
		n := m[namespaceID]
		if n == nil {
			n = &StateCount{}
			m[namespaceID] = n
		}
		if f := n.field(from); f != nil {
			*f--
		}
		if f := n.field(to); f != nil {
			*f++
		}
	}
}

// Get returns a namespace's counts (zero for a namespace never counted or seen).
func (c *StateCounts) Get(namespaceID string) StateCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.counts[namespaceID]; n != nil {
		return clampCount(*n)
	}
	return StateCount{}
}

// beginRecount starts collecting the transitions committed during a recount.
func (c *StateCounts) beginRecount() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.during = map[string]*StateCount{}
}

// endRecount replaces the counts of the recounted namespaces by the store's counts plus the
// transitions committed since beginRecount. ok=false (the count failed) keeps the counts.
func (c *StateCounts) endRecount(counted map[string]StateCount, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	during := c.during
	c.during = nil
	if !ok {
		return
	}
	for ns, n := range counted {
		if d := during[ns]; d != nil {
			n.Active += d.Active
			n.Inactive += d.Inactive
			n.CleanedUp += d.CleanedUp
		}
		c.counts[ns] = &n
	}
}

// clampCount keeps a count that drifted below zero (a transition counted before the recount
// that already held it) at zero until the next recount.
func clampCount(n StateCount) StateCount {
	return StateCount{Active: max(0, n.Active), Inactive: max(0, n.Inactive), CleanedUp: max(0, n.CleanedUp)}
}
