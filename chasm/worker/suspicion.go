package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/overload"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// Connection suspicion (README.md, "Connection suspicion (suspicion.go)"): a process that dies closes its
// sockets, so the frontend sees every connection of a dead worker end within milliseconds. A
// worker whose every connection closed without its ShutdownWorker is suspect: its lease is cut
// to worker.suspectGracePeriod. Its next poll or heartbeat, on any connection to any host,
// clears the suspicion and the normal lease applies again; without one it becomes INACTIVE
// with reason CONNECTION_LOST when the grace runs out, through the same expiry timer (and
// expiry brake) as a lease.

// SuspectGracePeriod is declared here as the orphan settings are. Read with the namespace NAME.
var SuspectGracePeriod = dynamicconfig.NewNamespaceDurationSetting(
	"worker.suspectGracePeriod",
	SuspectGracePeriodDefault,
	`How long a worker whose every connection closed without its ShutdownWorker keeps its lease:
a poll or heartbeat from it within this time clears the suspicion, otherwise it becomes
INACTIVE (reason CONNECTION_LOST) and its activities are rescheduled. Only ever shortens a
lease. 0 turns connection suspicion off: dead workers are then found by their lease alone.`,
)

// SuspectGracePeriodDefault covers the stock Go SDK's reconnection after a connection it did
// not close ends (a proxy reset, a GOAWAY): its pollers see the error, back off 200 ms
// (jittered down), redial and poll again: the new connection opens at once and the poll
// follows after the backoff. 500 ms is 2.5 times that backoff, and keeps a SIGKILLed
// worker's activity running elsewhere well under a second after the kill.
const SuspectGracePeriodDefault = 500 * time.Millisecond

// The SDK's pollers back off exponentially after consecutive failed polls (×2 per failed
// poll, two pollers per worker, so ×4 per lost connection; at most 10 s) and start over only
// once a poll succeeds, which a long poll does after up to a minute. So a worker whose
// connections are cut again before then polls later each time, and the grace grows with it:
// the k-th suspicion within suspectStreakWindow of the one before gets the grace × 4^(k-1),
// at most suspectGraceMax (the SDK's 10 s plus a margin), never less than the base grace.
const (
	suspectStreakWindow = 2 * time.Minute
	suspectGraceMax     = 20 * time.Second
	suspectGraceFactor  = 4
)

// streakGrace is the grace of a suspicion raised at now.
func streakGrace(w *Worker, base time.Duration, now time.Time) (time.Duration, int32) {
	streak := int32(1)
	if w.LastSuspected != nil && now.Sub(w.LastSuspected.AsTime()) < suspectStreakWindow {
		streak = w.SuspectStreak + 1
	}
	grace := base
	for i := int32(1); i < streak && grace < suspectGraceMax; i++ {
		grace *= suspectGraceFactor
	}
	return max(base, min(grace, suspectGraceMax)), streak
}

// suspectGrace is worker.suspectGracePeriod for the namespace (0: suspicion off).
func (c *Config) suspectGrace(namespace string) time.Duration {
	if c.SuspectGracePeriod == nil {
		return SuspectGracePeriodDefault
	}
	return max(0, c.SuspectGracePeriod(namespace))
}

// EventSuspected is every connection of the worker closing without its ShutdownWorker.
type EventSuspected struct {
	Reason workerpb.SuspectReason
	Grace  time.Duration
}

// EventSuspicionCleared is the worker seen again on a connection.
type EventSuspicionCleared struct{}

var (
	// TransitionSuspected cuts an active worker's lease to the grace, never lengthening it.
	// The expiry timer moves earlier when it must (a new singleton timer: the old one's
	// validator turns false).
	TransitionSuspected = chasm.NewTransition(
		[]workerpb.WorkerStatus{statusActive}, statusActive,
		func(w *Worker, ctx chasm.MutableContext, ev EventSuspected) error {
			now := ctx.Now()
			grace, streak := streakGrace(w, ev.Grace, now)
			w.SuspectStreak, w.LastSuspected = streak, timestamppb.New(now)
			deadline := now.Add(grace)
			if lease := w.LeaseDeadline.AsTime(); w.LeaseDeadline != nil && lease.Before(deadline) {
				deadline = lease
			}
			w.SuspectSince = timestamppb.New(now)
			w.SuspectReason = ev.Reason
			w.SuspectDeadline = timestamppb.New(deadline)
			w.SuspicionsRaised++
			if armed := leaseTimerTime(w); armed == nil || armed.AsTime().After(deadline) {
				armLeaseTimer(w, ctx, deadline)
			}
			return nil
		})

	// TransitionSuspicionCleared restores the lease the last heartbeat granted. The timer
	// armed at the suspect deadline then finds the lease extended and re-arms at it.
	TransitionSuspicionCleared = chasm.NewTransition(
		[]workerpb.WorkerStatus{statusActive}, statusActive,
		func(w *Worker, _ chasm.MutableContext, _ EventSuspicionCleared) error {
			clearSuspicion(w)
			return nil
		})

	// TransitionConnectionLost declares a suspect worker dead once the grace ran out.
	TransitionConnectionLost = chasm.NewTransition(
		[]workerpb.WorkerStatus{statusActive}, statusInactive,
		func(w *Worker, ctx chasm.MutableContext, ev EventLeaseExpired) error {
			return becomeInactive(w, ctx, workerpb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST, ev.Inactivation)
		})
)

// isSuspect reports a worker under connection suspicion.
func isSuspect(w *workerpb.WorkerState) bool { return w.GetSuspectDeadline() != nil }

// clearSuspicion ends a suspicion (a heartbeat, a poll, or the worker leaving ACTIVE).
// It reports whether there was one.
func clearSuspicion(w *Worker) bool {
	if !isSuspect(w.WorkerState) {
		return false
	}
	dropSuspicion(w)
	w.SuspicionsCleared++
	return true
}

// dropSuspicion forgets a suspicion without counting it cleared (the worker went INACTIVE).
func dropSuspicion(w *Worker) {
	w.SuspectSince = nil
	w.SuspectReason = workerpb.SuspectReason_SUSPECT_REASON_UNSPECIFIED
	w.SuspectDeadline = nil
}

// EffectiveDeadline is when the worker's lease ends: the heartbeat's lease deadline, or the
// suspect deadline when that is earlier.
func EffectiveDeadline(w *workerpb.WorkerState) time.Time {
	deadline := w.GetLeaseDeadline().AsTime()
	if isSuspect(w) && w.GetSuspectDeadline().AsTime().Before(deadline) {
		return w.GetSuspectDeadline().AsTime()
	}
	return deadline
}

// ReportConnections applies what frontends saw of the shard's workers' connections, in order.
// Most reports change nothing (a clear for a worker that is not suspect, a loss for a worker
// that is not ACTIVE): those are answered from a read, without a write.
func (h *Handler) ReportConnections(ctx context.Context, req *workerpb.ReportConnectionsRequest) (*workerpb.ReportConnectionsResponse, error) {
	resp := &workerpb.ReportConnectionsResponse{Errors: make([]*workerpb.EntryError, len(req.GetReports()))}
	for i, r := range req.GetReports() {
		resp.Errors[i] = &workerpb.EntryError{} // code 0: applied
		if err := h.reportConnection(ctx, r); err != nil {
			st := serviceerror.ToStatus(err)
			resp.Errors[i] = &workerpb.EntryError{Code: int32(st.Code()), Message: st.Message()}
		}
	}
	return resp, nil
}

func (h *Handler) reportConnection(ctx context.Context, r *workerpb.ConnectionReport) error {
	if r.GetNamespaceId() == "" || r.GetNamespace() == "" || r.GetWorkerInstanceKey() == "" {
		return serviceerror.NewInvalidArgument("namespace_id, namespace and worker_instance_key are required")
	}
	grace := h.config.suspectGrace(r.GetNamespace())
	if r.GetLost() && grace <= 0 {
		return nil // suspicion off in this namespace
	}
	ref, err := h.ref(r.GetNamespaceId(), r.GetWorkerInstanceKey())
	if err != nil {
		return err
	}
	release, err := h.admit(ctx, r.GetNamespaceId(), r.GetWorkerInstanceKey(), overload.ClassHeartbeat, proto.Size(r))
	if err != nil {
		return err
	}
	defer release()
	// A report made on a connection of another principal than the worker's owner changes
	// nothing: a namespace member must not be able to make another's worker suspect by
	// polling with its key and hanging up.
	applies := func(w *Worker) bool {
		if checkOwner(w, r.GetWorkerInstanceKey(), r.GetPrincipal(), r.GetPrincipalIsAdmin()) != nil || w.Status != statusActive {
			return false
		}
		// A loss of a worker already suspect is a new suspicion: the frontend reports a worker
		// lost again only after it was seen again on another connection, and that report may
		// have been replaced by the loss before it was sent (the frontend keeps a worker's newest report).
		return r.GetLost() || isSuspect(w.WorkerState)
	}
	need, err := chasm.ReadComponent(ctx, h.engine, ref, func(_ chasm.Context, w *Worker) (bool, error) { return applies(w), nil })
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil || !need {
		return err
	}
	var changed bool
	var since, deadline time.Time
	_, err = chasm.UpdateComponent(ctx, h.engine, ref, func(mctx chasm.MutableContext, w *Worker) (struct{}, error) {
		changed = applies(w)
		if !changed {
			return struct{}{}, nil
		}
		if r.GetLost() {
			since = mctx.Now()
			err := TransitionSuspected.Apply(w, mctx, EventSuspected{
				Reason: workerpb.SuspectReason_SUSPECT_REASON_CONNECTION_CLOSED, Grace: grace,
			})
			deadline = w.SuspectDeadline.AsTime()
			return struct{}{}, err
		}
		since = w.SuspectSince.AsTime()
		return struct{}{}, TransitionSuspicionCleared.Apply(w, mctx, EventSuspicionCleared{})
	})
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil || !changed {
		return err
	}
	if r.GetLost() {
		h.suspicionRaised(r.GetNamespaceId(), r.GetNamespace(), r.GetWorkerInstanceKey(), since, deadline)
	} else {
		h.suspicionCleared(r.GetNamespaceId(), r.GetNamespace(), r.GetWorkerInstanceKey(), since, "seen on a connection again")
	}
	return nil
}

// suspicionRaised counts, logs, and tells the expiry brake, which so sees a burst of
// connection losses (the server's own network failing) when it begins rather than when the
// first grace runs out: the grace serves as the expiry's settle time.
func (h *Handler) suspicionRaised(namespaceID, namespace, instanceKey string, since, deadline time.Time) {
	metrics.WorkerSuspicions.With(h.scope, metrics.OutcomeTag(SuspicionRaised)).Inc(1)
	h.logger.Info("worker suspect: its connections closed without ShutdownWorker",
		tag.WorkerID(instanceKey), tag.Namespace(namespace), zap.Duration("grace", deadline.Sub(since)))
	if h.brake != nil {
		h.brake.NoteSuspect(namespaceID, namespace, instanceKey, since, deadline)
	}
}

func (h *Handler) suspicionCleared(namespaceID, namespace, instanceKey string, since time.Time, by string) {
	metrics.WorkerSuspicions.With(h.scope, metrics.OutcomeTag(SuspicionCleared)).Inc(1)
	h.logger.Info("worker suspicion cleared: "+by,
		tag.WorkerID(instanceKey), tag.Namespace(namespace), zap.Duration("suspect-for", h.timeSource.Now().Sub(since)))
	if h.brake != nil {
		h.brake.ForgetSuspect(namespaceID, instanceKey)
	}
}

// Outcomes of the worker_suspicions metric.
const (
	SuspicionRaised    = "raised"
	SuspicionCleared   = "cleared"
	SuspicionConfirmed = "confirmed"
)

// SuspectDescription is the one-line account of a worker's suspicion, for describe outputs;
// "" when it is not suspect.
func SuspectDescription(w *workerpb.WorkerState) string {
	if !isSuspect(w) {
		return ""
	}
	why := "its connections closed without ShutdownWorker"
	if w.GetSuspectReason() != workerpb.SuspectReason_SUSPECT_REASON_CONNECTION_CLOSED {
		why = w.GetSuspectReason().String()
	}
	return fmt.Sprintf("since %s (%s); INACTIVE at %s unless it polls or heartbeats",
		w.GetSuspectSince().AsTime().UTC().Format(time.RFC3339Nano), why,
		w.GetSuspectDeadline().AsTime().UTC().Format(time.RFC3339Nano))
}
