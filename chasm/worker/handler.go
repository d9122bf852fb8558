package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/overload"
)

// Engine is what the handler needs of the host: transactions and listing.
type Engine interface {
	chasm.Engine
	chasm.Lister
}

// Handler is the history side of worker liveness (WorkerHistoryService).
type Handler struct {
	workerpb.UnimplementedWorkerHistoryServiceServer

	engine     Engine
	config     *Config
	timeSource clock.TimeSource
	scope      tally.Scope
	logger     *zap.Logger
	// hostStart is when this host started: orphan reconciliation waits a grace after it and
	// picks the attempts bound around it first.
	hostStart time.Time

	registrations *registrationLimiter
	capacity      *workerCap

	// admission, when set, decides what is served, waits, or is refused under load; known
	// ranks the heartbeats of workers seen lately above registrations; turnedAway keeps the
	// keys whose registration admission refused ranked as registrations when they retry.
	admission  Admitter
	known      *knownWorkers
	turnedAway *knownWorkers
	brake      *Brake
}

// NewHandler returns the handler. It is built when the host starts.
func NewHandler(engine Engine, config *Config, timeSource clock.TimeSource, scope tally.Scope, logger *zap.Logger, opts ...HandlerOption) *Handler {
	h := &Handler{engine: engine, config: config, timeSource: timeSource, scope: scope, logger: logger,
		hostStart: timeSource.Now(), registrations: newRegistrationLimiter(config.RegistrationRPS, config.RegistrationBurst, timeSource, scope),
		capacity: newWorkerCap(config.MaxWorkersPerNamespace, scope),
		known:    newKnownWorkers(timeSource), turnedAway: newKnownWorkers(timeSource)}
	for _, opt := range opts {
		opt(h)
	}
	return h
}

// SetWorkerCount tells the handler how many worker records a namespace holds in the store
// (StateGauges.ReportTotalTo): the base of worker.maxWorkersPerNamespace.
func (h *Handler) SetWorkerCount(namespaceID string, n int64) { h.capacity.setCount(namespaceID, n) }

// orphanPolicy is what orphan reconciliation reads for a namespace.
func (h *Handler) orphanPolicy(namespace string) OrphanPolicy {
	return OrphanPolicy{
		Enabled:      h.config.OrphanDetection != nil && h.config.OrphanDetection(namespace),
		Grace:        h.config.orphanGrace(namespace),
		HostStart:    h.hostStart,
		Inactivation: h.config.inactivation(namespace),
	}
}

// RecordHeartbeats records each heartbeat as its own atomic create-or-update; one failing does
// not fail the others. Heartbeats of one request run concurrently.
//
// The frontend calls it with chasm.ByReference, so req may be the frontend's own message (and
// hold the SDK's heartbeats): nothing of it is modified here, and the state machine keeps the
// heartbeat it carries as its snapshot, so neither may the caller once it has sent it. The
// reply is not touched once returned.
func (h *Handler) RecordHeartbeats(ctx context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
	if req.GetNamespaceId() == "" || req.GetNamespace() == "" {
		return nil, serviceerror.NewInvalidArgument("namespace_id and namespace are required")
	}
	results := make([]*workerpb.HeartbeatResult, len(req.GetHeartbeats()))
	if len(results) == 1 {
		results[0] = h.recordOne(ctx, req, req.GetHeartbeats()[0])
	} else {
		var wg sync.WaitGroup
		for i, entry := range req.GetHeartbeats() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = h.recordOne(ctx, req, entry)
			}()
		}
		wg.Wait()
	}
	if err := everyEntryUnavailable(results); err != nil {
		// Nothing was recorded and a retry may succeed: typically the shard is moving between
		// hosts ("not owned by this host"). Failing the call as a whole, not entry by entry,
		// lets the history router retry it against the shard's next owner within the
		// caller's deadline, so an SDK sees a planned handoff as a short delay, not an error.
		return nil, err
	}
	return &workerpb.RecordHeartbeatsResponse{Results: results}, nil
}

// everyEntryUnavailable returns the first result's error as an Unavailable when every result
// failed with Unavailable, nil otherwise.
func everyEntryUnavailable(results []*workerpb.HeartbeatResult) error {
	for _, r := range results {
		if codes.Code(r.GetError().GetCode()) != codes.Unavailable {
			return nil
		}
	}
	if len(results) == 0 {
		return nil
	}
	return serviceerror.NewUnavailable(results[0].GetError().GetMessage())
}

func (h *Handler) recordOne(ctx context.Context, req *workerpb.RecordHeartbeatsRequest, entry *workerpb.HeartbeatEntry) *workerpb.HeartbeatResult {
	start := h.timeSource.Now()
	namespaceID := req.GetNamespaceId()
	instanceKey := entry.GetHeartbeat().GetWorkerInstanceKey()
	var result *workerpb.HeartbeatResult
	class := h.heartbeatClass(namespaceID, entry)
	release, err := h.admit(ctx, namespaceID, instanceKey, class, proto.Size(entry))
	if err == nil {
		result, err = h.heartbeat(ctx, req, entry)
		release()
	} else if class == overload.ClassRegistration {
		h.turnedAway.add(fingerprint(namespaceID, instanceKey))
	}
	metrics.WorkerHeartbeatLatency.With(h.scope).Record(h.timeSource.Now().Sub(start))
	if err == nil && result.GetStatus() == statusActive {
		h.known.add(fingerprint(namespaceID, instanceKey))
	}
	if err != nil {
		st := serviceerror.ToStatus(err)
		if st.Code() == codes.Canceled {
			// The call's context was canceled: by its caller, who reads no answer, or inside
			// the server, by the history router taking the call back from an owner that
			// stopped answering (history/routing.go). Whoever reads this answer must retry,
			// and no SDK retries Canceled. Whether the heartbeat was recorded is unknown; one
			// recorded twice takes no lease back (renewLease).
			st = serviceerror.ToStatus(serviceerror.NewUnavailable(
				"the heartbeat's call was canceled before it was answered, its outcome unknown; retry: " + st.Message()))
		}
		entryErr := &workerpb.EntryError{Code: int32(st.Code()), Message: st.Message()}
		var mismatch *ConflictTokenMismatchError
		if errors.As(err, &mismatch) {
			entryErr.CurrentConflictToken = mismatch.Current
			entryErr.ConflictTokenMismatch = true
		}
		return &workerpb.HeartbeatResult{Error: entryErr}
	}
	metrics.WorkerHeartbeats.With(h.scope).Inc(1)
	return result
}

func (h *Handler) heartbeat(ctx context.Context, req *workerpb.RecordHeartbeatsRequest, entry *workerpb.HeartbeatEntry) (*workerpb.HeartbeatResult, error) {
	namespaceID, namespace := req.GetNamespaceId(), req.GetNamespace()
	hb := entry.GetHeartbeat()
	instanceKey := hb.GetWorkerInstanceKey()
	if instanceKey == "" {
		return nil, serviceerror.NewInvalidArgument("heartbeat.worker_instance_key is required")
	}
	lease := h.config.LeaseFor(namespace, entry.GetLeaseDuration().AsDuration(), hb.GetElapsedSinceLastHeartbeat().AsDuration())
	key := chasm.ExecutionKey{NamespaceID: namespaceID, BusinessID: instanceKey}
	policy := h.orphanPolicy(namespace)
	var (
		orphans  []Orphan
		evidence OrphanEvidence
		// suspectSince is set when this heartbeat cleared a connection suspicion.
		suspectSince *timestamppb.Timestamp
	)

	result, _, err := chasm.UpdateWithStart(ctx, h.engine, key,
		func(chasm.MutableContext) (*Worker, error) { return NewWorker(namespace), nil },
		func(mctx chasm.MutableContext, w *Worker) (*workerpb.HeartbeatResult, error) {
			if err := checkOwner(w, instanceKey, req.GetPrincipal(), req.GetPrincipalIsAdmin()); err != nil {
				return nil, err
			}
			if entry.ConflictToken != nil && entry.GetConflictToken() != w.ConflictToken {
				return nil, &ConflictTokenMismatchError{WorkerInstanceKey: instanceKey, Sent: entry.GetConflictToken(), Current: w.ConflictToken}
			}
			claimed := false
			if w.OwnerPrincipal == "" && !req.GetPrincipalIsAdmin() {
				// The first authenticated heartbeat claims the worker. An admin's does not: it
				// acts on behalf of others.
				w.OwnerPrincipal = req.GetPrincipal()
				claimed = w.OwnerPrincipal != ""
			}
			ev := EventHeartbeat{Heartbeat: hb, Lease: lease, Requested: entry.GetLeaseDuration().AsDuration() > 0,
				WriteInterval: h.config.heartbeatWriteInterval(namespace),
				// What must be written whatever the lease: a claim, and the conflict token a
				// client that sends one relies on (it would be refused after a crash that lost
				// the token it was given). Binding changes and orphans are tasks and
				// collection changes, which the engine always writes.
				MayDefer: !claimed && entry.ConflictToken == nil}
			if reported := hb.GetElapsedSinceLastHeartbeat().AsDuration(); entry.GetLeaseDuration() == nil && reported > 0 &&
				w.Status == statusActive && w.LastHeartbeatTime != nil {
				// The SDK reports the time since its previous beat was sent, which can be much
				// shorter than its cadence: a beat held up by a stall (a shard moving between
				// hosts, a retried call) reports the interval before it, though the server saw
				// none for longer; and right after the stall the SDK sends its next beat at once
				// (its ticker kept a tick), which reports a few milliseconds. Taken alone, either
				// would give a lease that runs out before the next regular beat. So the interval
				// is the longest of the reported one, the previous beat's and the one the server
				// saw since the beat it applied last.
				seen := mctx.Now().Sub(w.LastHeartbeatTime.AsTime())
				previous := w.GetLastHeartbeat().GetElapsedSinceLastHeartbeat().AsDuration()
				if interval := max(seen, previous); interval > reported {
					ev.Lease = max(lease, h.config.LeaseFor(namespace, 0, interval))
				}
			}
			resurrected := false
			suspectSince = nil
			if isSuspect(w.WorkerState) {
				suspectSince = w.SuspectSince
			}
			var prevHeartbeat time.Time // zero unless this heartbeat renews an active lease
			orphans = nil
			var err error
			switch w.Status {
			case statusUnspecified:
				// Checked under the lock, after create-or-update decided this is a new worker:
				// a refused registration leaves nothing behind.
				if err := h.registrations.allow(namespace); err != nil {
					return nil, err
				}
				if err := h.capacity.admit(namespaceID, namespace); err != nil {
					return nil, err
				}
				err = TransitionRegistered.Apply(w, mctx, ev)
			case statusActive:
				prevHeartbeat = w.GetLastHeartbeatTime().AsTime()
				err = TransitionHeartbeatReceived.Apply(w, mctx, ev)
			case statusInactive:
				if isShutdownEcho(w, hb) {
					// The SDK sends ShutdownWorker first and stops heartbeating last, so one
					// SHUTTING_DOWN heartbeat can follow the shutdown: keep its snapshot, but a
					// worker that said goodbye is not brought back by its own farewell.
					recordHeartbeat(w, hb)
					return &workerpb.HeartbeatResult{ConflictToken: w.ConflictToken, Status: w.Status}, nil
				}
				resurrected = true
				err = TransitionResurrected.Apply(w, mctx, ev)
			default:
				err = newCleanedUpError(instanceKey)
			}
			if err != nil {
				return nil, err
			}
			if err := h.applyBindings(mctx, w, namespaceID, entry); err != nil {
				return nil, err
			}
			if orphans, evidence, err = reconcileOrphans(w, mctx, hb.GetActivityTaskSlotsInfo(), prevHeartbeat, policy); err != nil {
				return nil, err
			}
			return &workerpb.HeartbeatResult{
				LeaseDeadline: w.LeaseDeadline,
				ConflictToken: w.ConflictToken,
				ShouldDrain:   w.DrainRequested,
				Status:        w.Status,
				Resurrected:   resurrected,
			}, nil
		})
	if err != nil {
		return nil, err
	}
	for _, o := range orphans {
		metrics.WorkerOrphansFound.With(h.scope, metrics.ReasonTag(o.Reason)).Inc(1)
		h.logger.Info("orphaned activity found: rescheduling it", tag.WorkerID(instanceKey), tag.Namespace(namespace),
			tag.BusinessID(o.Binding.ActivityId), tag.RunID(o.Binding.RunId), zap.Int64("stamp", o.Binding.Stamp),
			zap.String("reason", o.Reason), zap.Time("bound-time", o.Binding.GetBoundTime().AsTime()),
			zap.String("found-by", "activity slots: bound attempts outnumbered used slots over consecutive heartbeats"),
			zap.Int32("used-slots", evidence.UsedSlots), zap.Int32("eligible-bound", evidence.Eligible),
			zap.Int32("total-processed", evidence.TotalProcessed), zap.Time("suspect-since", evidence.SuspectSince))
	}
	if suspectSince != nil {
		h.suspicionCleared(namespaceID, namespace, instanceKey, suspectSince.AsTime(), "heartbeat")
	}
	if result.Resurrected {
		metrics.WorkerResurrections.With(h.scope).Inc(1)
		h.logger.Info("inactive worker resurrected", tag.WorkerID(instanceKey), tag.Namespace(namespace))
	}
	return result, nil
}

// checkOwner refuses a heartbeat or shutdown of a worker claimed by another principal, unless
// the caller is an admin of the namespace or auth is off (principal empty). Nothing is
// changed: the caller returns the error before applying anything.
func checkOwner(w *Worker, instanceKey, principal string, admin bool) error {
	if principal == "" || admin || w.OwnerPrincipal == "" || w.OwnerPrincipal == principal {
		return nil
	}
	return serviceerror.NewPermissionDenied(fmt.Sprintf(
		"worker %q belongs to another principal: only its owner or an admin may heartbeat or shut it down", instanceKey), "")
}

// isShutdownEcho reports a heartbeat that only restates a shutdown the worker already made.
func isShutdownEcho(w *Worker, hb *workerv1.WorkerHeartbeat) bool {
	if w.InactiveReason != workerpb.InactiveReason_INACTIVE_REASON_SHUTDOWN {
		return false
	}
	switch hb.GetStatus() {
	case enumspb.WORKER_STATUS_SHUTTING_DOWN, enumspb.WORKER_STATUS_SHUTDOWN:
		return true
	}
	return false
}

// applyBindings applies binding deltas idempotently: binding an attempt twice, or unbinding
// one that is not bound, changes nothing. An unbind names the attempt's stamp when it has one,
// so a late unbind of an old attempt cannot remove a newer one.
func (h *Handler) applyBindings(ctx chasm.MutableContext, w *Worker, namespaceID string, entry *workerpb.HeartbeatEntry) error {
	for _, b := range entry.GetUnbound() {
		key := BindingKey(b.GetActivityId(), b.GetRunId())
		existing, ok, err := BoundActivities.Get(ctx, key)
		if err != nil {
			return err
		}
		if ok && (b.GetStamp() == 0 || existing.Stamp == b.GetStamp()) {
			BoundActivities.Delete(ctx, key)
			w.OrphanUnbinds++
		}
	}
	for _, b := range entry.GetBound() {
		if b.GetActivityId() == "" {
			return serviceerror.NewInvalidArgument("bound activity needs an activity_id")
		}
		key := BindingKey(b.GetActivityId(), b.GetRunId())
		existing, ok, err := BoundActivities.Get(ctx, key)
		if err != nil {
			return err
		}
		if ok && existing.Stamp == b.GetStamp() {
			continue
		}
		BoundActivities.Put(ctx, key, &workerpb.BoundActivity{
			NamespaceId: namespaceID, ActivityId: b.GetActivityId(), RunId: b.GetRunId(),
			Stamp: b.GetStamp(), BoundTime: timestamppb.New(ctx.Now()),
		})
	}
	n := BoundActivities.Len(ctx)
	if limit := h.config.MaxBindingsPerWorker(w.Namespace); n > limit {
		return serviceerror.NewInvalidArgument(fmt.Sprintf(
			"worker %s would have %d bound activities, more than worker.maxBindingsPerWorker (%d)",
			ctx.ExecutionKey().BusinessID, n, limit))
	}
	w.BoundActivityCount = int64(n)
	return nil
}

// ShutdownWorker makes the worker INACTIVE (reason SHUTDOWN) and reschedules whatever is still
// bound to it at once. Idempotent: a worker already INACTIVE or CLEANED_UP is left as it is.
func (h *Handler) ShutdownWorker(ctx context.Context, req *workerpb.ShutdownWorkerRequest) (*workerpb.ShutdownWorkerResponse, error) {
	if req.GetNamespaceId() == "" || req.GetNamespace() == "" || req.GetWorkerInstanceKey() == "" {
		return nil, serviceerror.NewInvalidArgument("namespace_id, namespace and worker_instance_key are required")
	}
	release, err := h.admit(ctx, req.GetNamespaceId(), req.GetWorkerInstanceKey(), overload.ClassHeartbeat, proto.Size(req))
	if err != nil {
		return nil, err
	}
	defer release()
	ref, err := h.ref(req.GetNamespaceId(), req.GetWorkerInstanceKey())
	if err != nil {
		return nil, err
	}
	// A shutdown of a key the server has never seen answers OK and creates nothing: a record
	// per unknown key would let any client grow the store (and this host's memory) at will.
	rescheduled, err := chasm.UpdateComponent(ctx, h.engine, ref, func(mctx chasm.MutableContext, w *Worker) (int32, error) {
		if err := checkOwner(w, req.GetWorkerInstanceKey(), req.GetPrincipal(), req.GetPrincipalIsAdmin()); err != nil {
			return 0, err
		}
		if !TransitionShutdown.Possible(w) {
			return 0, nil
		}
		bound := int32(w.BoundActivityCount)
		return bound, TransitionShutdown.Apply(w, mctx, EventShutdown{
			Inactivation: h.config.inactivation(w.Namespace), Heartbeat: req.GetHeartbeat(),
		})
	})
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return &workerpb.ShutdownWorkerResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	metrics.WorkerShutdowns.With(h.scope).Inc(1)
	h.logger.Info("worker shut down", tag.WorkerID(req.GetWorkerInstanceKey()), tag.Namespace(req.GetNamespace()),
		zap.Int32("rescheduled-activities", rescheduled))
	return &workerpb.ShutdownWorkerResponse{RescheduledActivities: rescheduled}, nil
}

// DrainWorker asks an active worker to drain: its heartbeats answer should_drain from now on.
func (h *Handler) DrainWorker(ctx context.Context, req *workerpb.DrainWorkerRequest) (*workerpb.DrainWorkerResponse, error) {
	ref, err := h.ref(req.GetNamespaceId(), req.GetWorkerInstanceKey())
	if err != nil {
		return nil, err
	}
	release, err := h.admit(ctx, req.GetNamespaceId(), req.GetWorkerInstanceKey(), overload.ClassHeartbeat, proto.Size(req))
	if err != nil {
		return nil, err
	}
	defer release()
	_, err = chasm.UpdateComponent(ctx, h.engine, ref, func(_ chasm.MutableContext, w *Worker) (struct{}, error) {
		if w.Status != statusActive {
			return struct{}{}, serviceerror.NewFailedPrecondition(fmt.Sprintf(
				"worker %s is %s; only an active worker can drain", req.GetWorkerInstanceKey(), StatusName(w.Status)))
		}
		w.DrainRequested = true
		return struct{}{}, nil
	})
	if err != nil {
		return nil, err
	}
	return &workerpb.DrainWorkerResponse{}, nil
}

// DescribeWorker returns the full liveness record.
func (h *Handler) DescribeWorker(ctx context.Context, req *workerpb.DescribeWorkerRequest) (*workerpb.DescribeWorkerResponse, error) {
	ref, err := h.ref(req.GetNamespaceId(), req.GetWorkerInstanceKey())
	if err != nil {
		return nil, err
	}
	release, err := h.admit(ctx, req.GetNamespaceId(), req.GetWorkerInstanceKey(), overload.ClassRead, proto.Size(req))
	if err != nil {
		return nil, err
	}
	defer release()
	record, err := chasm.ReadComponent(ctx, h.engine, ref, func(rctx chasm.Context, w *Worker) (*workerpb.WorkerRecord, error) {
		record := &workerpb.WorkerRecord{
			WorkerInstanceKey: req.GetWorkerInstanceKey(),
			State:             proto.Clone(w.WorkerState).(*workerpb.WorkerState),
		}
		if req.GetIncludeBoundActivities() {
			err := BoundActivities.Range(rctx, func(_ string, b *workerpb.BoundActivity) bool {
				record.BoundActivities = append(record.BoundActivities, b)
				return true
			})
			if err != nil {
				return nil, err
			}
		}
		return record, nil
	})
	if err != nil {
		return nil, err
	}
	return &workerpb.DescribeWorkerResponse{Worker: record, ExpiryBrake: h.brakeStatus(req.GetNamespaceId())}, nil
}

// ListWorkerPageSizeMax bounds one ListWorkers page.
const ListWorkerPageSizeMax = 1000

// ListWorkers pages through a namespace's workers, optionally of one status.
func (h *Handler) ListWorkers(ctx context.Context, req *workerpb.ListWorkersRequest) (*workerpb.ListWorkersResponse, error) {
	if req.GetNamespaceId() == "" {
		return nil, serviceerror.NewInvalidArgument("namespace_id is required")
	}
	pageSize := int(req.GetPageSize())
	if pageSize <= 0 || pageSize > ListWorkerPageSizeMax {
		pageSize = ListWorkerPageSizeMax
	}
	release, err := h.admit(ctx, req.GetNamespaceId(), "", overload.ClassRead, proto.Size(req))
	if err != nil {
		return nil, err
	}
	defer release()
	listed, next, err := chasm.ListComponents[*Worker](ctx, h.engine, h.engine.Registry(), req.GetNamespaceId(),
		chasm.IndexedFields{Status: StatusName(req.GetStatus())}, pageSize, req.GetNextPageToken())
	if err != nil {
		return nil, err
	}
	resp := &workerpb.ListWorkersResponse{NextPageToken: next, ExpiryBrake: h.brakeStatus(req.GetNamespaceId())}
	for _, l := range listed {
		resp.Workers = append(resp.Workers, &workerpb.WorkerRecord{WorkerInstanceKey: l.Key.BusinessID, State: l.Component.WorkerState})
	}
	return resp, nil
}

func (h *Handler) ref(namespaceID, instanceKey string) (chasm.ComponentRef, error) {
	if namespaceID == "" || instanceKey == "" {
		return chasm.ComponentRef{}, serviceerror.NewInvalidArgument("namespace_id and worker_instance_key are required")
	}
	return chasm.NewRef[*Worker](h.engine, chasm.ExecutionKey{NamespaceID: namespaceID, BusinessID: instanceKey})
}

// LeaseRemaining is how long the worker's lease still runs at now (0 once expired).
func LeaseRemaining(w *workerpb.WorkerState, now time.Time) time.Duration {
	return max(0, w.GetLeaseDeadline().AsTime().Sub(now))
}

// UpdateBindings applies binding deltas without renewing the lease. A bind to a worker that is
// no longer ACTIVE is refused (WORKER_NOT_ACTIVE): the bind raced with the worker's expiry, and
// only the caller can still reschedule that attempt. Unbinds always apply, idempotently.
func (h *Handler) UpdateBindings(ctx context.Context, req *workerpb.UpdateBindingsRequest) (*workerpb.UpdateBindingsResponse, error) {
	ref, err := h.ref(req.GetNamespaceId(), req.GetWorkerInstanceKey())
	if err != nil {
		return nil, err
	}
	release, err := h.admit(ctx, req.GetNamespaceId(), req.GetWorkerInstanceKey(), overload.ClassHeartbeat, proto.Size(req))
	if err != nil {
		return nil, err
	}
	defer release()
	outcome, err := chasm.UpdateComponent(ctx, h.engine, ref, func(mctx chasm.MutableContext, w *Worker) (workerpb.BindOutcome, error) {
		entry := &workerpb.HeartbeatEntry{Unbound: req.GetUnbound()}
		outcome := workerpb.BindOutcome_BIND_OUTCOME_APPLIED
		if w.Status == statusActive {
			entry.Bound = req.GetBound()
		} else if len(req.GetBound()) > 0 {
			outcome = workerpb.BindOutcome_BIND_OUTCOME_WORKER_NOT_ACTIVE
		}
		return outcome, h.applyBindings(mctx, w, req.GetNamespaceId(), entry)
	})
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return &workerpb.UpdateBindingsResponse{Outcome: workerpb.BindOutcome_BIND_OUTCOME_WORKER_UNKNOWN}, nil
	}
	if err != nil {
		return nil, err
	}
	return &workerpb.UpdateBindingsResponse{Outcome: outcome}, nil
}
