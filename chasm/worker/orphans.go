package worker

import (
	"slices"
	"time"

	workerv1 "go.temporal.io/api/worker/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/shard"
)

// Reasons an attempt was picked as an orphan (the reason tag of activity_orphans_rescheduled).
const (
	// OrphanReasonUnseen: bound after the last heartbeat whose slot count covered every bound
	// attempt, so the worker has never been seen running it (typically a lost poll response).
	OrphanReasonUnseen = "unseen_dispatch"
	// OrphanReasonUnheard: seen running, and the worker has since finished more tasks than the
	// server heard end (typically a completion the SDK gave up on).
	OrphanReasonUnheard = "unheard_completion"
	// OrphanReasonRestart: bound within the grace of this host's start, when a server restart
	// may have dropped the poll response or the completion.
	OrphanReasonRestart = "dispatched_near_restart"
	// OrphanReasonSlots: none of the above; only the slot count says the worker runs fewer
	// attempts than are bound to it (typically a completion the SDK gave up on).
	OrphanReasonSlots = "slot_mismatch"
)

// OrphanPolicy is what orphan reconciliation reads from config and the host, decided by the
// caller so the reconciliation stays a pure function of state, heartbeat and policy.
type OrphanPolicy struct {
	Enabled bool
	// Grace: how old a binding must be, how long a mismatch must last, and how long the host
	// must have been up, before an attempt is taken back.
	Grace time.Duration
	// HostStart is when this history host started (its restart, as the worker's shard saw it).
	HostStart time.Time
	Inactivation
}

// Orphan is one attempt taken back from a live worker, for the caller's log line.
type Orphan struct {
	Binding *workerpb.BoundActivity
	Reason  string
}

// OrphanEvidence is what the reconciliation saw, for the caller's log line.
type OrphanEvidence struct {
	UsedSlots, TotalProcessed, Eligible int32
	SuspectSince                        time.Time
}

// reconcileOrphans compares the attempts bound to a live worker with the activity slots its
// heartbeat says it uses, and takes back the attempts it does not run. It runs in the
// heartbeat's transaction, after the lease was renewed; prevHeartbeat is the server time of
// the worker's previous accepted heartbeat.
//
// The rule (README.md, "Orphans", says why it never takes work a worker runs, or exactly when
// it can):
//
//   - Only a heartbeat that reports activity slots, following an accepted one, is used; any
//     other clears the suspicion. Workflow, local-activity and Nexus slots are ignored: only
//     activity tasks are bound.
//   - Eligible: attempts bound at or before cutoff = min(previous heartbeat, now - grace). The
//     SDK takes a heartbeat's snapshot after the previous heartbeat returned, so a poll
//     response sent before the cutoff had at least a heartbeat interval and the grace to
//     arrive. A task holds its slot from its arrival until its completion call has returned
//     (or been given up), so every eligible attempt the worker runs is counted in
//     current_used_slots, and excess = eligible - used is a lower bound of the eligible
//     attempts the worker does not run. (Used slots may also count tasks not bound to it:
//     that only lowers the excess.)
//   - A first heartbeat with excess > 0 records a suspicion. The attempts are taken back only
//     at a later heartbeat that still shows it, among the attempts that were eligible then
//     too, when the suspicion is at least grace old and the host has been up at least grace:
//     a completion committed just before (whose unbind is still on its way) would otherwise
//     count as an orphan and hide one.
//   - k = min(excess then, excess now among those attempts). The slot count says how many,
//     not which. Attempts never seen (bound after the last heartbeat whose count covered every
//     eligible attempt) are picked first, a lost poll response; but if the worker has since
//     finished more tasks (total_processed_tasks) than the server heard end (unbinds), a
//     completion was lost, and the attempts seen running are picked first. Then attempts
//     bound within the grace of this host's start; the most recently bound first in each.
//
// The picked attempts leave the worker's bindings and go to their shards as an orphan batch
// (ActivityRescheduleTask with orphan set), applied as a dead worker's: only if still STARTED
// by this worker with the same stamp, with a new stamp that refuses the old attempt's late
// completion; an attempt that recorded an activity heartbeat since the suspicion is left
// alone and bound again (ALIVE).
func reconcileOrphans(w *Worker, ctx chasm.MutableContext, slots *workerv1.WorkerSlotsInfo, prevHeartbeat time.Time, p OrphanPolicy) ([]Orphan, OrphanEvidence, error) {
	now := ctx.Now()
	ev := OrphanEvidence{UsedSlots: slots.GetCurrentUsedSlots(), TotalProcessed: slots.GetTotalProcessedTasks()}
	if !p.Enabled || slots == nil || prevHeartbeat.IsZero() || w.Status != statusActive {
		clearOrphanSuspicion(w)
		return nil, ev, nil
	}
	cutoff := prevHeartbeat
	if g := now.Add(-p.Grace); g.Before(cutoff) {
		cutoff = g
	}
	used := int(slots.GetCurrentUsedSlots())
	if w.BoundActivityCount <= int64(used) {
		// The usual heartbeat of a healthy worker: every binding is accounted for, without
		// reading the bindings (a worker may have thousands).
		clearOrphanSuspicion(w)
		w.OrphanSeenCutoff = timestamppb.New(cutoff)
		w.OrphanSeenProcessed = slots.GetTotalProcessedTasks()
		w.OrphanSeenUnbinds = w.OrphanUnbinds
		ev.Eligible = int32(w.BoundActivityCount)
		return nil, ev, nil
	}
	bindings, err := boundActivities(ctx)
	if err != nil {
		return nil, ev, err
	}
	eligible := boundBefore(bindings, cutoff)
	ev.Eligible = int32(len(eligible))
	excess := len(eligible) - used
	if excess <= 0 {
		// Every eligible attempt is accounted for: they are "seen" from here on.
		clearOrphanSuspicion(w)
		w.OrphanSeenCutoff = timestamppb.New(cutoff)
		if len(bindings) <= used {
			// Every binding is, too: the baseline of tasks finished against ends heard. (Not
			// while some are not: a task running that is not yet eligible can hide a lost
			// completion, and the baseline would absorb it.)
			w.OrphanSeenProcessed = slots.GetTotalProcessedTasks()
			w.OrphanSeenUnbinds = w.OrphanUnbinds
		}
		return nil, ev, nil
	}
	if w.OrphanSuspectSince == nil {
		suspect(w, now, excess, cutoff)
		return nil, ev, nil
	}
	since := w.OrphanSuspectSince.AsTime()
	ev.SuspectSince = since
	candidates := boundBefore(bindings, w.OrphanSuspectCutoff.AsTime())
	k := min(int(w.OrphanSuspectCount), len(candidates)-used)
	if k <= 0 {
		// The attempts that were in excess then are accounted for now; what is in excess
		// now involves later bindings: a new suspicion.
		suspect(w, now, excess, cutoff)
		return nil, ev, nil
	}
	if now.Sub(since) < p.Grace || now.Sub(p.HostStart) < p.Grace {
		w.OrphanSuspectCount = int64(k)
		return nil, ev, nil
	}

	seen := time.Time{}
	// Tasks the worker finished since the last consistent heartbeat that the server did not
	// hear end: completions lost (or still on their way, which the grace covers).
	var unheard int64
	if w.OrphanSeenCutoff != nil {
		seen = w.OrphanSeenCutoff.AsTime()
		unheard = int64(slots.GetTotalProcessedTasks()-w.OrphanSeenProcessed) - (w.OrphanUnbinds - w.OrphanSeenUnbinds)
	}
	reason := func(b *workerpb.BoundActivity) string {
		bound := b.GetBoundTime().AsTime()
		switch {
		case bound.After(seen):
			return OrphanReasonUnseen
		case unheard > 0:
			return OrphanReasonUnheard
		case bound.Sub(p.HostStart).Abs() <= p.Grace:
			return OrphanReasonRestart
		}
		return OrphanReasonSlots
	}
	// A lost completion is among the attempts seen running: the new ones are the worker's
	// current work. Otherwise a lost poll response is among the attempts never seen.
	rank := map[string]int{OrphanReasonUnseen: 0, OrphanReasonUnheard: 1, OrphanReasonRestart: 2, OrphanReasonSlots: 3}
	if unheard > 0 {
		rank = map[string]int{OrphanReasonUnheard: 0, OrphanReasonRestart: 1, OrphanReasonSlots: 2, OrphanReasonUnseen: 3}
	}
	slices.SortStableFunc(candidates, func(a, b keyedBinding) int {
		if ra, rb := rank[reason(a.b)], rank[reason(b.b)]; ra != rb {
			return ra - rb
		}
		return b.b.GetBoundTime().AsTime().Compare(a.b.GetBoundTime().AsTime()) // most recent first
	})
	picked := make([]Orphan, 0, k)
	batch := make([]*workerpb.BoundActivity, 0, k)
	for _, c := range candidates[:k] {
		r := reason(c.b)
		BoundActivities.Delete(ctx, c.key)
		entry := &workerpb.BoundActivity{
			NamespaceId: c.b.NamespaceId, ActivityId: c.b.ActivityId, RunId: c.b.RunId, Stamp: c.b.Stamp,
			BoundTime: c.b.BoundTime, OrphanReason: r,
		}
		batch = append(batch, entry)
		picked = append(picked, Orphan{Binding: entry, Reason: r})
	}
	w.BoundActivityCount -= int64(k)
	w.OrphanEpoch++
	w.OrphansFound += int64(k)
	if err := fanOutReschedules(w, ctx, batch, p.Inactivation, true, w.OrphanSuspectSince); err != nil {
		return nil, ev, err
	}
	clearOrphanSuspicion(w)
	return picked, ev, nil
}

type keyedBinding struct {
	key string
	b   *workerpb.BoundActivity
}

func boundActivities(ctx chasm.Context) ([]keyedBinding, error) {
	var out []keyedBinding
	err := BoundActivities.Range(ctx, func(key string, b *workerpb.BoundActivity) bool {
		out = append(out, keyedBinding{key: key, b: b})
		return true
	})
	return out, err
}

func boundBefore(bindings []keyedBinding, cutoff time.Time) []keyedBinding {
	var out []keyedBinding
	for _, kb := range bindings {
		if !kb.b.GetBoundTime().AsTime().After(cutoff) {
			out = append(out, kb)
		}
	}
	return out
}

func suspect(w *Worker, now time.Time, excess int, cutoff time.Time) {
	w.OrphanSuspectSince = timestamppb.New(now)
	w.OrphanSuspectCount = int64(excess)
	w.OrphanSuspectCutoff = timestamppb.New(cutoff)
}

func clearOrphanSuspicion(w *Worker) {
	w.OrphanSuspectSince = nil
	w.OrphanSuspectCount = 0
	w.OrphanSuspectCutoff = nil
}

// fanOutReschedules sends activities to their own shards: one batch per destination shard
// (chunked), recorded in pending_reschedules until acknowledged. The batches travel together
// in ActivityRescheduleFanOutTasks of at most a chunk's worth of activities each (one task
// for a worker's usual few hundred), so handing a worker's activities back is one task row
// and one acknowledgement, whatever the number of shards. An inactivation's batches are named
// by inactive_epoch, an orphan reconciliation's by orphan_epoch (and the orphan flag).
func fanOutReschedules(w *Worker, ctx chasm.MutableContext, activities []*workerpb.BoundActivity, inact Inactivation, orphan bool, suspectSince *timestamppb.Timestamp) error {
	if inact.NumShards <= 0 {
		return errNoShardCount
	}
	chunkSize := inact.ChunkSize
	if chunkSize <= 0 {
		chunkSize = RescheduleChunkSizeDefault
	}
	epoch := w.InactiveEpoch
	if orphan {
		epoch = w.OrphanEpoch
	}
	byShard := make(map[int32][]*workerpb.BoundActivity)
	for _, b := range activities {
		s := shard.ForKey(b.NamespaceId, b.ActivityId, inact.NumShards)
		byShard[s] = append(byShard[s], b)
	}
	shards := make([]int32, 0, len(byShard))
	for s := range byShard {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	fanOut, carried := &workerpb.ActivityRescheduleFanOutTask{}, 0
	flush := func() {
		if len(fanOut.Batches) > 0 {
			ctx.AddTask(chasm.TaskAttributes{Destination: RescheduleFanOutDestination}, fanOut)
		}
		fanOut, carried = &workerpb.ActivityRescheduleFanOutTask{}, 0
	}
	for _, s := range shards {
		batch := byShard[s]
		for chunk := 0; len(batch) > 0; chunk++ {
			n := min(chunkSize, len(batch))
			if carried+n > chunkSize {
				flush()
			}
			fanOut.Batches = append(fanOut.Batches, &workerpb.ActivityRescheduleTask{
				Epoch: epoch, DestinationShard: s, Chunk: int32(chunk), Activities: batch[:n],
				InactiveTime: w.InactiveTime, Orphan: orphan, SuspectSince: suspectSince,
			})
			carried += n
			w.PendingReschedules = append(w.PendingReschedules, &workerpb.PendingReschedule{
				Epoch: epoch, DestinationShard: s, Chunk: int32(chunk), ActivityCount: int32(n), Orphan: orphan,
			})
			batch = batch[n:]
		}
	}
	flush()
	return nil
}
