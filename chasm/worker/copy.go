package worker

import (
	"slices"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// shallowCopy is the copy of a committed worker state that a transaction works on
// (chasm.WithCopyOnWrite). Transitions replace the messages they change (a heartbeat's
// snapshot, a timestamp, a pending reschedule) and never modify one in place, so the copy
// shares them. The snapshot an SDK sends is most of a worker's state: a heartbeat copies
// none of it. TestShallowCopyCopiesEveryField fails when a field of WorkerState is missing.
func shallowCopy(s *workerpb.WorkerState) *workerpb.WorkerState {
	c := &workerpb.WorkerState{
		Status:               s.Status,
		Namespace:            s.Namespace,
		LastHeartbeat:        s.LastHeartbeat,
		LeaseDeadline:        s.LeaseDeadline,
		LeaseDuration:        s.LeaseDuration,
		LastHeartbeatTime:    s.LastHeartbeatTime,
		FirstHeartbeatTime:   s.FirstHeartbeatTime,
		InactiveReason:       s.InactiveReason,
		InactiveTime:         s.InactiveTime,
		CleanupTime:          s.CleanupTime,
		ResurrectionCount:    s.ResurrectionCount,
		ConflictToken:        s.ConflictToken,
		DrainRequested:       s.DrainRequested,
		BoundActivityCount:   s.BoundActivityCount,
		InactiveEpoch:        s.InactiveEpoch,
		PendingReschedules:   slices.Clone(s.PendingReschedules),
		HeartbeatCount:       s.HeartbeatCount,
		LeaseTimerTime:       s.LeaseTimerTime,
		DeleteTime:           s.DeleteTime,
		OrphanSuspectSince:   s.OrphanSuspectSince,
		OrphanSuspectCount:   s.OrphanSuspectCount,
		OrphanSuspectCutoff:  s.OrphanSuspectCutoff,
		OrphanEpoch:          s.OrphanEpoch,
		OrphansFound:         s.OrphansFound,
		OrphanSeenCutoff:     s.OrphanSeenCutoff,
		OrphanUnbinds:        s.OrphanUnbinds,
		OrphanSeenProcessed:  s.OrphanSeenProcessed,
		OrphanSeenUnbinds:    s.OrphanSeenUnbinds,
		OwnerPrincipal:       s.OwnerPrincipal,
		SuspectSince:         s.SuspectSince,
		SuspectReason:        s.SuspectReason,
		SuspectDeadline:      s.SuspectDeadline,
		SuspicionsRaised:     s.SuspicionsRaised,
		SuspicionsCleared:    s.SuspicionsCleared,
		SuspectStreak:        s.SuspectStreak,
		LastSuspected:        s.LastSuspected,
		LeaseBound:           s.LeaseBound,
		WrittenHeartbeatTime: s.WrittenHeartbeatTime,
	}
	// Fields of a newer version of the state, kept so that they are written back as read.
	if unknown := s.ProtoReflect().GetUnknown(); len(unknown) > 0 {
		c.ProtoReflect().SetUnknown(slices.Clone(unknown))
	}
	return c
}
