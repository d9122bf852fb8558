package worker

import (
	"errors"
	"fmt"
	"time"

	workerv1 "go.temporal.io/api/worker/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// The worker lifecycle (README.md draws it):
//
//	UNSPECIFIED ─first heartbeat─► ACTIVE ─heartbeat─► ACTIVE
//	ACTIVE ─lease expired / shutdown─► INACTIVE ─heartbeat─► ACTIVE (resurrected)
//	INACTIVE ─cleanup delay─► CLEANED_UP (terminal)

const (
	statusUnspecified = workerpb.WorkerStatus_WORKER_STATUS_UNSPECIFIED
	statusActive      = workerpb.WorkerStatus_WORKER_STATUS_ACTIVE
	statusInactive    = workerpb.WorkerStatus_WORKER_STATUS_INACTIVE
	statusCleanedUp   = workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP
)

// EventHeartbeat is an accepted heartbeat with the lease the server granted.
type EventHeartbeat struct {
	Heartbeat *workerv1.WorkerHeartbeat
	Lease     time.Duration
	// Requested says the client asked for Lease itself (the extended API's lease_duration):
	// it then replaces the current lease even when shorter. A lease the server derived from
	// the SDK's interval never shortens an ACTIVE worker's current one (renewLease).
	Requested bool
	// WriteInterval is worker.heartbeatWriteInterval (0: write every heartbeat); MayDefer says
	// the caller found nothing else in the heartbeat that must be written (renewLease).
	WriteInterval time.Duration
	MayDefer      bool
}

// Inactivation carries what becoming INACTIVE needs to know, read from config by the caller so
// that transitions stay pure functions of state and event.
type Inactivation struct {
	CleanupDelay time.Duration
	NumShards    int32
	ChunkSize    int
}

// EventLeaseExpired is the lease deadline passing without a heartbeat.
type EventLeaseExpired struct{ Inactivation }

// EventShutdown is the worker saying goodbye (ShutdownWorker), with its final snapshot if any.
type EventShutdown struct {
	Inactivation
	Heartbeat *workerv1.WorkerHeartbeat
}

// EventCleanup is the cleanup delay passing while INACTIVE. Retention is how long the
// CLEANED_UP record is then kept before it is deleted.
type EventCleanup struct{ Retention time.Duration }

// EventDeleted is the retention of a CLEANED_UP worker passing.
type EventDeleted struct{}

var (
	// TransitionRegistered is a new worker's first heartbeat.
	TransitionRegistered = chasm.NewTransition(
		[]workerpb.WorkerStatus{statusUnspecified}, statusActive,
		func(w *Worker, ctx chasm.MutableContext, ev EventHeartbeat) error {
			w.FirstHeartbeatTime = timestamppb.New(ctx.Now())
			renewLease(w, ctx, ev, false)
			return nil
		})

	// TransitionHeartbeatReceived renews an active worker's lease.
	TransitionHeartbeatReceived = chasm.NewTransition(
		[]workerpb.WorkerStatus{statusActive}, statusActive,
		func(w *Worker, ctx chasm.MutableContext, ev EventHeartbeat) error {
			renewLease(w, ctx, ev, !ev.Requested && sentVsRecorded(w, ev.Heartbeat) <= 0)
			return nil
		})

	// TransitionResurrected brings an INACTIVE worker back. Its activities were already
	// rescheduled and stay so: it starts with nothing bound. Clearing the cleanup time makes
	// the pending cleanup timer stale.
	TransitionResurrected = chasm.NewTransition(
		[]workerpb.WorkerStatus{statusInactive}, statusActive,
		func(w *Worker, ctx chasm.MutableContext, ev EventHeartbeat) error {
			w.ResurrectionCount++
			w.InactiveReason = workerpb.InactiveReason_INACTIVE_REASON_UNSPECIFIED
			w.InactiveTime = nil
			w.CleanupTime = nil
			w.DrainRequested = false
			renewLease(w, ctx, ev, false)
			return nil
		})

	// TransitionLeaseExpired declares an active worker dead.
	TransitionLeaseExpired = chasm.NewTransition(
		[]workerpb.WorkerStatus{statusActive}, statusInactive,
		func(w *Worker, ctx chasm.MutableContext, ev EventLeaseExpired) error {
			return becomeInactive(w, ctx, workerpb.InactiveReason_INACTIVE_REASON_LEASE_EXPIRED, ev.Inactivation)
		})

	// TransitionShutdown records a graceful shutdown. A worker never seen before (heartbeats
	// disabled in its SDK) is recorded directly as INACTIVE.
	TransitionShutdown = chasm.NewTransition(
		[]workerpb.WorkerStatus{statusUnspecified, statusActive}, statusInactive,
		func(w *Worker, ctx chasm.MutableContext, ev EventShutdown) error {
			if ev.Heartbeat != nil {
				recordHeartbeat(w, ev.Heartbeat)
			}
			return becomeInactive(w, ctx, workerpb.InactiveReason_INACTIVE_REASON_SHUTDOWN, ev.Inactivation)
		})

	// TransitionCleanedUp ends the worker for good.
	TransitionCleanedUp = chasm.NewTransition(
		[]workerpb.WorkerStatus{statusInactive}, statusCleanedUp,
		func(w *Worker, ctx chasm.MutableContext, ev EventCleanup) error {
			w.CleanupTime = timestamppb.New(ctx.Now())
			w.DrainRequested = false
			deleteAt := ctx.Now().Add(ev.Retention)
			w.DeleteTime = timestamppb.New(deleteAt)
			ctx.AddTask(chasm.TaskAttributes{ScheduledTime: deleteAt}, &workerpb.WorkerDeleteTask{})
			return nil
		})

	// TransitionDeleted removes a CLEANED_UP worker's record: its key is unknown from then on.
	TransitionDeleted = chasm.NewTransition(
		[]workerpb.WorkerStatus{statusCleanedUp}, statusCleanedUp,
		func(_ *Worker, ctx chasm.MutableContext, _ EventDeleted) error {
			ctx.DeleteExecution()
			return nil
		})
)

// renewLease grants a new lease from the transaction's (server) time.
//
// keep never moves the deadline earlier: when the new lease would end before the one already
// granted, that one stays, with its length. An ACTIVE worker's heartbeat keeps the lease unless
// the client asked for its lease itself or the heartbeat was sent after the one recorded last
// (sentVsRecorded). An acknowledged lease is a promise to the worker, and the derived lease
// is shortest exactly for a heartbeat applied again, or out of order: a call resent to its
// shard's next owner after its first delivery committed, or the copy of a call held in a frozen
// connection that reaches the owner after the call was answered through another host
// (history/relay.go). Such a copy reports the short interval its SDK saw when it sent it, right
// after a slow beat, so the lease read from it would be worker.minLeaseDuration. A newer beat
// may shorten the lease: the default lease of a worker's first beat gives way to three of its
// intervals at its second.
//
// The worker keeps one expiry timer (LeaseExpiryTask is a singleton), and a written heartbeat
// moves it only when it must or soon would:
//   - none is pending (first heartbeat, resurrection, a worker stored before lease_timer_time
//     existed), or the pending one fires after the new, shorter deadline;
//   - the pending one fires within half the new lease, likely before the next heartbeat.
//
// Otherwise the heartbeat writes only the worker's state, and one answered from memory moves
// nothing durable. A timer that fires while the lease has been extended waits in memory for
// the deadline then current (LeaseExpiryTaskExecutor), so detection stays exact; a heartbeat
// that leaves the timer where it is says so beforehand (holdLeaseTimer), so that the host
// holds the timer until the new deadline instead of running it to learn the same. A live
// worker's timer then never runs.
func renewLease(w *Worker, ctx chasm.MutableContext, ev EventHeartbeat, keep bool) {
	now := ctx.Now()
	deadline := now.Add(ev.Lease)
	lease := durationpb.New(ev.Lease)
	if current := w.GetLeaseDeadline(); keep && current != nil && current.AsTime().After(deadline) {
		// The lease already granted outlasts this one: it stays, with its length.
		deadline = current.AsTime()
		if lease = w.GetLeaseDuration(); lease == nil {
			lease = durationpb.New(deadline.Sub(now))
		}
	}
	// A heartbeat that only renews the lease of a worker whose timer fires before the new
	// deadline may be answered from memory within the write interval of the last written
	// heartbeat, while its deadline stays within lease_bound: the timer does not move (when it
	// fires it waits in memory for the deadline), and the next written heartbeat sets a new
	// bound.
	deferred := ev.MayDefer && ev.WriteInterval > 0 && w.LeaseBound != nil && !deadline.After(w.LeaseBound.AsTime()) &&
		w.WrittenHeartbeatTime != nil && now.Sub(w.WrittenHeartbeatTime.AsTime()) < ev.WriteInterval &&
		!isSuspect(w.WorkerState) && w.LeaseTimerTime != nil && !w.LeaseTimerTime.AsTime().After(deadline)
	if sentVsRecorded(w, ev.Heartbeat) >= 0 { // an older copy leaves the newer snapshot
		recordHeartbeat(w, ev.Heartbeat)
	}
	w.LastHeartbeatTime = timestamppb.New(now)
	w.LeaseDuration = lease
	w.LeaseDeadline = timestamppb.New(deadline)
	w.ConflictToken++
	w.HeartbeatCount++
	if deferred {
		ctx.DeferWrite()
		holdLeaseTimer(ctx, deadline)
		return
	}
	w.LeaseBound = timestamppb.New(deadline.Add(ev.WriteInterval))
	w.WrittenHeartbeatTime = w.LastHeartbeatTime
	// A heartbeat proves the worker alive: a connection suspicion ends (suspicion.go). The
	// timer armed at the suspect deadline then waits for the new deadline when it fires.
	clearSuspicion(w)
	if w.LeaseTimerTime == nil {
		armLeaseTimer(w, ctx, deadline)
		return
	}
	if armed := w.LeaseTimerTime.AsTime(); armed.After(deadline) || armed.Sub(now) < deadline.Sub(now)/2 {
		armLeaseTimer(w, ctx, deadline)
		return
	}
	holdLeaseTimer(ctx, deadline)
}

// holdLeaseTimer tells the host that the worker's pending expiry timer, armed at or before
// deadline, would only wait for deadline if it ran before it (LeaseExpiryTaskExecutor: the
// deadline is within lease_bound, and the worker is not suspect), so that the host holds it
// until then (chasm.MutableContext.PostponeTimer). The hold ends with the worker's next
// change: one that makes the deadline earlier, such as a suspicion, needs nothing more.
func holdLeaseTimer(ctx chasm.MutableContext, deadline time.Time) {
	ctx.PostponeTimer(deadline, &workerpb.LeaseExpiryTask{})
}

// sentVsRecorded compares when hb was sent with when the heartbeat the worker recorded last was,
// by the SDK's own clock (heartbeat_time): +1 sent after it, -1 before it (a copy arriving out
// of order), 0 at the same time (a copy) or when either time is missing and it cannot tell.
func sentVsRecorded(w *Worker, hb *workerv1.WorkerHeartbeat) int {
	sent, last := hb.GetHeartbeatTime(), w.GetLastHeartbeat().GetHeartbeatTime()
	if sent == nil || last == nil {
		return 0
	}
	return sent.AsTime().Compare(last.AsTime())
}

// armLeaseTimer replaces the worker's expiry timer with one at fireAt.
func armLeaseTimer(w *Worker, ctx chasm.MutableContext, fireAt time.Time) {
	w.LeaseTimerTime = timestamppb.New(fireAt)
	ctx.AddTask(chasm.TaskAttributes{ScheduledTime: fireAt}, &workerpb.LeaseExpiryTask{})
}

// leaseTimerTime is when the worker's pending expiry timer fires. A worker stored before
// lease_timer_time existed had its timer replaced on every heartbeat, at the lease deadline.
func leaseTimerTime(w *Worker) *timestamppb.Timestamp {
	if w.LeaseTimerTime != nil {
		return w.LeaseTimerTime
	}
	return w.LeaseDeadline
}

// recordHeartbeat keeps the snapshot the worker sent: the message itself, which nothing
// modifies once it is handed to the state machine (Handler.RecordHeartbeats), as the state
// never modifies a nested message in place (chasm.WithCopyOnWrite). The SDK sends its
// environment only until a heartbeat is accepted, so an earlier one is kept when a later
// heartbeat omits it, on a copy of the sent message's top level.
func recordHeartbeat(w *Worker, hb *workerv1.WorkerHeartbeat) {
	if hb == nil {
		return
	}
	if hb.Environment == nil && w.LastHeartbeat.GetEnvironment() != nil {
		next := &workerv1.WorkerHeartbeat{}
		sent, kept := hb.ProtoReflect(), next.ProtoReflect()
		sent.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			kept.Set(fd, v)
			return true
		})
		kept.SetUnknown(sent.GetUnknown())
		next.Environment = w.LastHeartbeat.Environment
		hb = next
	}
	w.LastHeartbeat = hb
}

// becomeInactive schedules the cleanup and hands every bound activity to its own shard, in a
// batch per destination shard carried by a fan-out task (fanOutReschedules), so the worker's
// transaction does no I/O and a slow shard delays only its own activities.
func becomeInactive(w *Worker, ctx chasm.MutableContext, reason workerpb.InactiveReason, inact Inactivation) error {
	now := ctx.Now()
	// The expiry timer, if still pending (a shutdown), is stale from here on; a resurrection
	// arms a new one.
	w.LeaseTimerTime = nil
	w.InactiveReason = reason
	w.InactiveTime = timestamppb.New(now)
	w.InactiveEpoch++
	cleanup := now.Add(inact.CleanupDelay)
	w.CleanupTime = timestamppb.New(cleanup)
	ctx.AddTask(chasm.TaskAttributes{ScheduledTime: cleanup}, &workerpb.WorkerCleanupTask{})

	if inact.NumShards <= 0 {
		return errNoShardCount
	}
	var bound []*workerpb.BoundActivity
	var keys []string
	err := BoundActivities.Range(ctx, func(key string, b *workerpb.BoundActivity) bool {
		bound = append(bound, b)
		keys = append(keys, key)
		return true
	})
	if err != nil {
		return err
	}
	for _, key := range keys {
		BoundActivities.Delete(ctx, key)
	}
	w.BoundActivityCount = 0
	clearOrphanSuspicion(w)
	dropSuspicion(w)
	return fanOutReschedules(w, ctx, bound, inact, false, nil)
}

// errNoShardCount is a wiring error: Config.NumShards was not set.
var errNoShardCount = errors.New("worker: rescheduling needs the shard count")

// RescheduleDestination names the outbound destination of a shard's reschedule batches: the
// outbound queue isolates destinations, so one unreachable shard holds up only its own.
func RescheduleDestination(shardID int32) string {
	return fmt.Sprintf("history-shard/%d", shardID)
}

// RescheduleFanOutDestination is the outbound destination of the fan-outs, which reach every
// shard: a shard that does not answer one gets its batch as a task of its own, under
// RescheduleDestination.
const RescheduleFanOutDestination = "history-shards"
