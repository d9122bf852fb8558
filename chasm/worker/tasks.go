package worker

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
)

// LeaseExpiryTaskExecutor declares a worker INACTIVE when its lease deadline passes.
type LeaseExpiryTaskExecutor struct {
	config *Config
	// brake, when set, may hold an expiry back (the server is behind, or too many at once).
	brake  ExpiryBrake
	scope  tally.Scope
	logger *zap.Logger
}

// Validate holds only for the worker's armed timer while it is ACTIVE: a timer that already
// fired re-armed (or ended the lease), and a replaced one no longer matches.
func (e *LeaseExpiryTaskExecutor) Validate(_ chasm.Context, w *Worker, attrs chasm.TaskAttributes, _ *workerpb.LeaseExpiryTask) (bool, error) {
	armed := leaseTimerTime(w)
	return w.Status == statusActive && armed != nil && armed.AsTime().Equal(attrs.ScheduledTime), nil
}

// Execute makes the worker INACTIVE and fans its activities out to their shards, unless
// heartbeats extended the lease since the timer was armed: then the timer waits for the
// current deadline, in memory if the heartbeats that moved it were not written (the timer
// stays where the store has it), else re-armed there. The deadline is the suspect deadline
// while the worker is under connection suspicion (suspicion.go), and the worker then becomes
// INACTIVE with reason CONNECTION_LOST.
//
// A worker that has not beaten since the host may have lost unwritten heartbeats
// (RecoveredAt: the shard was acquired, or a failed write dropped them) may have been granted
// a deadline up to lease_bound by heartbeats this state lacks: its lease runs until then.
func (e *LeaseExpiryTaskExecutor) Execute(ctx chasm.MutableContext, w *Worker, attrs chasm.TaskAttributes, _ *workerpb.LeaseExpiryTask) error {
	deadline := currentDeadline(ctx, w)
	if deadline.After(attrs.ScheduledTime) && ctx.Now().Before(deadline) {
		if w.LeaseBound != nil && !deadline.After(w.LeaseBound.AsTime()) {
			// Heartbeats answered from memory moved the deadline, within the lease_bound
			// the store has: the timer waits in memory, nothing is written, and after a
			// crash the stored timer fires and finds the bound.
			return chasm.DeferTask(deadline)
		}
		armLeaseTimer(w, ctx, deadline)
		return nil
	}
	if e.brake != nil {
		// Held: nothing is written and the timer stays armed, valid, in the host's memory; it
		// is offered again at recheck. Once it does run, the transition below (or the re-arm
		// above) makes the validator false as usual.
		if recheck, held := e.brake.Hold(ctx.ExecutionKey().NamespaceID, w.Namespace, ctx.ExecutionKey().BusinessID,
			deadline, ctx.Now(), w.GetLeaseDuration().AsDuration()); held {
			return chasm.DeferTask(recheck)
		}
	}
	bound := w.BoundActivityCount
	transition, reason := TransitionLeaseExpired, "worker lease expired: INACTIVE"
	var suspectSince time.Time
	// CONNECTION_LOST only when the suspicion is what ended the lease: a suspect deadline cut
	// to the lease deadline ends a lease that ran out anyway.
	if isSuspect(w.WorkerState) && w.SuspectDeadline.AsTime().Before(w.LeaseDeadline.AsTime()) {
		transition, reason = TransitionConnectionLost, "worker connection lost: INACTIVE"
		suspectSince = w.SuspectSince.AsTime()
	}
	if err := transition.Apply(w, ctx, EventLeaseExpired{Inactivation: e.config.inactivation(w.Namespace)}); err != nil {
		return err
	}
	metrics.WorkerLeaseExpiries.With(e.scope).Inc(1)
	fields := []zap.Field{
		tag.WorkerID(ctx.ExecutionKey().BusinessID), tag.Namespace(w.Namespace),
		zap.Stringer("reason", w.InactiveReason),
		zap.Int64("bound-activities", bound), zap.Duration("detection-lag", ctx.Now().Sub(attrs.ScheduledTime)),
	}
	if !suspectSince.IsZero() {
		metrics.WorkerSuspicions.With(e.scope, metrics.OutcomeTag(SuspicionConfirmed)).Inc(1)
		fields = append(fields, zap.Time("suspect-since", suspectSince),
			zap.String("found-by", "its connections closed without ShutdownWorker and it did not poll or heartbeat within worker.suspectGracePeriod"))
	}
	e.logger.Info(reason, fields...)
	return nil
}

// currentDeadline is when the worker's lease runs out: its effective deadline (the suspect
// deadline under suspicion), or lease_bound for a worker that has not beaten since the host may
// have lost its unwritten heartbeats.
func currentDeadline(ctx chasm.Context, w *Worker) time.Time {
	deadline := EffectiveDeadline(w.WorkerState)
	if bound := w.GetLeaseBound(); bound != nil && !isSuspect(w.WorkerState) &&
		w.GetLastHeartbeatTime().AsTime().Before(ctx.RecoveredAt()) && bound.AsTime().After(deadline) {
		deadline = bound.AsTime()
	}
	return deadline
}

// WorkerCleanupTaskExecutor ends an INACTIVE worker once the cleanup delay has passed.
type WorkerCleanupTaskExecutor struct {
	config *Config
	scope  tally.Scope
	logger *zap.Logger
}

// Validate holds only while the worker is still INACTIVE since the same moment: a resurrection
// clears the cleanup time, and a later inactivation sets a new one.
func (e *WorkerCleanupTaskExecutor) Validate(_ chasm.Context, w *Worker, attrs chasm.TaskAttributes, _ *workerpb.WorkerCleanupTask) (bool, error) {
	return w.Status == statusInactive && w.CleanupTime != nil && w.CleanupTime.AsTime().Equal(attrs.ScheduledTime), nil
}

// Execute cleans the worker up.
func (e *WorkerCleanupTaskExecutor) Execute(ctx chasm.MutableContext, w *Worker, _ chasm.TaskAttributes, _ *workerpb.WorkerCleanupTask) error {
	if err := TransitionCleanedUp.Apply(w, ctx, EventCleanup{Retention: e.config.CleanedUpRetention(w.Namespace)}); err != nil {
		return err
	}
	metrics.WorkerCleanups.With(e.scope).Inc(1)
	e.logger.Info("worker cleaned up", tag.WorkerID(ctx.ExecutionKey().BusinessID), tag.Namespace(w.Namespace))
	return nil
}

// WorkerDeleteTaskExecutor deletes a CLEANED_UP worker's record once its retention has passed,
// so that a fleet that churns through instance keys does not grow the store forever.
type WorkerDeleteTaskExecutor struct {
	scope  tally.Scope
	logger *zap.Logger
}

// Validate holds only while the worker is CLEANED_UP with the task's delete time; a deleted
// worker takes its tasks with it.
func (e *WorkerDeleteTaskExecutor) Validate(_ chasm.Context, w *Worker, attrs chasm.TaskAttributes, _ *workerpb.WorkerDeleteTask) (bool, error) {
	return w.Status == statusCleanedUp && w.DeleteTime != nil && w.DeleteTime.AsTime().Equal(attrs.ScheduledTime), nil
}

// Execute deletes the worker.
func (e *WorkerDeleteTaskExecutor) Execute(ctx chasm.MutableContext, w *Worker, _ chasm.TaskAttributes, _ *workerpb.WorkerDeleteTask) error {
	if err := TransitionDeleted.Apply(w, ctx, EventDeleted{}); err != nil {
		return err
	}
	metrics.WorkerDeletions.With(e.scope).Inc(1)
	e.logger.Debug("cleaned-up worker deleted", tag.WorkerID(ctx.ExecutionKey().BusinessID), tag.Namespace(w.Namespace))
	return nil
}

// ActivityRescheduleTaskExecutor delivers one batch of a dead worker's activities to the shard
// that owns them, retried (by the outbound queue) until that shard answers. Since the
// fan-out (ActivityRescheduleFanOutTaskExecutor) it carries only the batches whose shard did
// not answer it, and those written by an earlier version.
type ActivityRescheduleTaskExecutor struct {
	delivery rescheduleDelivery
	acks     *rescheduleAcks
}

// Validate holds until the destination has acknowledged the batch.
func (e *ActivityRescheduleTaskExecutor) Validate(_ chasm.Context, w *Worker, _ chasm.TaskAttributes, task *workerpb.ActivityRescheduleTask) (bool, error) {
	return pendingIndex(w, task) >= 0, nil
}

// Execute sends the batch, then records the acknowledgement on the worker. The destination
// applies each entry only if the activity is still started by this worker with the same
// stamp, so a redelivery after a crash between the two steps changes nothing.
func (e *ActivityRescheduleTaskExecutor) Execute(ctx context.Context, ref chasm.ComponentRef, _ chasm.TaskAttributes, task *workerpb.ActivityRescheduleTask) error {
	if err := e.delivery.send(ctx, ref, task); err != nil {
		return err
	}
	return e.acks.Do(ctx, ref, []rescheduleOutcome{{batch: task, delivered: true}})
}

// rescheduleFanOutBatchTimeout is how long the fan-out waits for one shard's answer before it
// hands that batch to a task of its own: a shard that hangs must not hold up the
// acknowledgement of the others, nor the outbound slot, for long.
const rescheduleFanOutBatchTimeout = 2 * time.Second

// ActivityRescheduleFanOutTaskExecutor delivers every batch of one inactivation (or orphan
// reconciliation) at once, each to its own shard, and records the outcome in one write of the
// worker: the batches acknowledged leave pending_reschedules, and each batch whose shard did
// not answer becomes an ActivityRescheduleTask of its own, which the outbound queue retries
// against that shard alone. A restart of many workers so costs one task row and one
// acknowledgement per worker, not one of each per destination shard.
type ActivityRescheduleFanOutTaskExecutor struct {
	delivery     rescheduleDelivery
	acks         *rescheduleAcks
	batchTimeout time.Duration
}

// Validate holds while a batch of the task is pending and not yet handed to a task of its own.
func (e *ActivityRescheduleFanOutTaskExecutor) Validate(_ chasm.Context, w *Worker, _ chasm.TaskAttributes, task *workerpb.ActivityRescheduleFanOutTask) (bool, error) {
	for _, b := range task.Batches {
		if i := pendingIndex(w, b); i >= 0 && !w.PendingReschedules[i].OwnTask {
			return true, nil
		}
	}
	return false, nil
}

// Execute sends the batches concurrently, then writes the outcome. Resending after a crash
// between the two is harmless, as for ActivityRescheduleTaskExecutor.
func (e *ActivityRescheduleFanOutTaskExecutor) Execute(ctx context.Context, ref chasm.ComponentRef, _ chasm.TaskAttributes, task *workerpb.ActivityRescheduleFanOutTask) error {
	outcomes := make([]rescheduleOutcome, len(task.Batches))
	var wg sync.WaitGroup
	for i, b := range task.Batches {
		wg.Go(func() {
			bctx, cancel := context.WithTimeout(ctx, e.batchTimeout)
			defer cancel()
			outcomes[i] = rescheduleOutcome{batch: b, delivered: e.delivery.send(bctx, ref, b) == nil}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err // stopping: the whole task runs again
	}
	return e.acks.Do(ctx, ref, outcomes)
}

// rescheduleDelivery sends one batch to its shard and counts the outcome.
type rescheduleDelivery struct {
	rescheduler ActivityRescheduler
	scope       tally.Scope
	logger      *zap.Logger
}

func (d rescheduleDelivery) send(ctx context.Context, ref chasm.ComponentRef, task *workerpb.ActivityRescheduleTask) error {
	resp, err := d.rescheduler.RescheduleActivities(ctx, &workerpb.RescheduleActivitiesRequest{
		NamespaceId:       ref.Key.NamespaceID,
		ShardId:           task.DestinationShard,
		WorkerInstanceKey: ref.Key.BusinessID,
		Activities:        task.Activities,
		InactiveTime:      task.InactiveTime,
		Orphan:            task.Orphan,
		SuspectSince:      task.SuspectSince,
	})
	if err != nil {
		metrics.ActivityRescheduleErrors.With(d.scope, metrics.KindTag(serviceerror.ToStatus(err).Code().String())).Inc(1)
		return err
	}
	var rescheduled, notFound, stale, failed, alive int
	for _, outcome := range resp.GetOutcomes() {
		switch outcome {
		case workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_RESCHEDULED:
			rescheduled++
		case workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_NOT_FOUND:
			notFound++
		case workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_FAILED:
			failed++
		case workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_ALIVE:
			alive++
		default:
			stale++
		}
	}
	metrics.ActivitiesRescheduled.With(d.scope).Inc(int64(rescheduled))
	// Debug: a worker's activities go out in a batch per destination shard, so a restart of
	// many workers would log thousands of these; its INACTIVE line carries the total.
	d.logger.Debug("activities of inactive worker handed back",
		tag.WorkerID(ref.Key.BusinessID), tag.ShardID(task.DestinationShard), zap.Bool("orphans", task.Orphan),
		zap.Int("rescheduled", rescheduled), zap.Int("not-found", notFound), zap.Int("stale", stale),
		zap.Int("failed", failed), zap.Int("alive", alive))
	return nil
}

func pendingIndex(w *Worker, task *workerpb.ActivityRescheduleTask) int {
	return slices.IndexFunc(w.PendingReschedules, func(p *workerpb.PendingReschedule) bool {
		return p.Epoch == task.Epoch && p.DestinationShard == task.DestinationShard && p.Chunk == task.Chunk && p.Orphan == task.Orphan
	})
}

func (c *Config) inactivation(namespace string) Inactivation {
	return Inactivation{CleanupDelay: c.CleanupDelay(namespace), NumShards: c.NumShards, ChunkSize: c.RescheduleChunkSize}
}
