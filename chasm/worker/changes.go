package worker

import (
	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// ChangeKind names a committed change of a worker, as a live view reports it.
type ChangeKind uint8

// The changes a worker's commit can report.
const (
	ChangeRegistered ChangeKind = iota + 1
	ChangeHeartbeat
	ChangeInactive
	ChangeResurrected
	ChangeCleanedUp
	ChangeDeleted
	ChangeDrainRequested
	ChangeActivitiesRescheduled
)

// Change is one committed change of one worker. State is the worker's state after the change
// (its last state for ChangeDeleted): it is shared with the engine and must not be modified.
type Change struct {
	Kind              ChangeKind
	NamespaceID       string
	WorkerInstanceKey string
	State             *workerpb.WorkerState
	// Encoded returns State as the store keeps it, encoded at most once for the engine and
	// the sink together (chasm.Commit.Encoded); shared and read-only like State. Nil in changes
	// not made from a commit, and it returns nil for a deletion: the sink encodes State then.
	Encoded func() []byte
	// Count is the number of activities handed back, for ChangeActivitiesRescheduled.
	Count int64
}

// ChangeSink receives the events of committed worker changes, in commit order for each worker.
// Publish is called with the worker's lock held: it must not block.
type ChangeSink interface {
	Publish(events ...Change)
}

// commitObserver turns committed state changes into events for sink. It compares states
// rather than hooking each transition, so whatever path changed the worker (a heartbeat, a
// timer, an acknowledgement) is reported, and only once it is durable.
func commitObserver(sink ChangeSink) chasm.CommitObserver {
	return func(c chasm.Commit) {
		b, _ := c.Before.(*workerpb.WorkerState)
		a, _ := c.After.(*workerpb.WorkerState)
		if a == nil {
			return
		}
		if events := Changes(c.Key, b, a, c.Deleted); len(events) > 0 {
			for i := range events {
				events[i].Encoded = c.Encoded
			}
			sink.Publish(events...)
		}
	}
}

// Changes derives the events of one committed change from the worker's state before (nil when
// the commit created the worker) and after it.
func Changes(key chasm.ExecutionKey, before, after *workerpb.WorkerState, deleted bool) []Change {
	ev := func(kind ChangeKind) Change {
		return Change{Kind: kind, NamespaceID: key.NamespaceID, WorkerInstanceKey: key.BusinessID, State: after}
	}
	if deleted {
		return []Change{ev(ChangeDeleted)}
	}
	var events []Change
	from, to := before.GetStatus(), after.GetStatus()
	switch {
	case from == to && to == statusActive:
		// Every accepted heartbeat increments the conflict token. A connection suspicion raised
		// or cleared is shown the same way: the state it carries says which.
		if before.GetConflictToken() != after.GetConflictToken() || isSuspect(before) != isSuspect(after) {
			events = append(events, ev(ChangeHeartbeat))
		}
	case from == to:
	case to == statusActive && from == statusInactive:
		events = append(events, ev(ChangeResurrected))
	case to == statusActive:
		events = append(events, ev(ChangeRegistered))
	case to == statusInactive:
		events = append(events, ev(ChangeInactive))
	case to == statusCleanedUp:
		events = append(events, ev(ChangeCleanedUp))
	}
	if after.GetDrainRequested() && !before.GetDrainRequested() {
		events = append(events, ev(ChangeDrainRequested))
	}
	// Acknowledgements of reschedule batches are transactions of their own (no status change).
	if n := acknowledged(before, after); n > 0 && from == to {
		e := ev(ChangeActivitiesRescheduled)
		e.Count = n
		events = append(events, e)
	}
	return events
}

// acknowledged counts the activities of the reschedule batches pending before and not after.
func acknowledged(before, after *workerpb.WorkerState) int64 {
	var n int64
	for _, p := range before.GetPendingReschedules() {
		still := false
		for _, q := range after.GetPendingReschedules() {
			if p.GetEpoch() == q.GetEpoch() && p.GetDestinationShard() == q.GetDestinationShard() && p.GetChunk() == q.GetChunk() {
				still = true
				break
			}
		}
		if !still {
			n += int64(p.GetActivityCount())
		}
	}
	return n
}
