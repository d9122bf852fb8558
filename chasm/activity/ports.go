package activity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// What the Activity component needs from the rest of the server. Each is called outside the
// execution lock: from a side-effect task, retried by the outbound queue when it returns an
// error, or (the Dispatcher) by the Handler right after a reschedule commits. Each must be
// idempotent.

// ActivityTaskRef is one dispatch of one attempt: what matching queues and hands to a poll,
// and what the frontend then names in RecordActivityTaskStarted.
type ActivityTaskRef struct {
	NamespaceID string
	TaskQueue   string
	ActivityID  string
	RunID       string
	// Stamp fences the attempt: history accepts a poll's start only for the current stamp.
	Stamp int64
	// ScheduledTime is when the attempt became dispatchable (after any retry backoff).
	ScheduledTime time.Time
}

// activityTaskRef is the matching task of the current attempt of the activity at key.
func activityTaskRef(key chasm.ExecutionKey, a *Activity) ActivityTaskRef {
	return ActivityTaskRef{
		NamespaceID: key.NamespaceID, TaskQueue: a.TaskQueue, ActivityID: key.BusinessID, RunID: key.RunID,
		Stamp: a.Stamp, ScheduledTime: a.AttemptScheduledTime.AsTime(),
	}
}

// Dispatcher queues activity tasks on their task queue (matching).
type Dispatcher interface {
	// AddActivityTask queues ref for the next poll of ref.TaskQueue. Queuing the same ref twice
	// is harmless (the second start of one stamp is refused); an error is retried.
	AddActivityTask(ctx context.Context, ref ActivityTaskRef) error
}

// Binding names one attempt of one activity run.
type Binding struct {
	ActivityID string
	RunID      string
	Stamp      int64
}

// BindOutcome is the worker's answer to a bind.
type BindOutcome int

const (
	// BindOutcomeBound: the attempt is bound; the worker's death will reschedule it.
	BindOutcomeBound BindOutcome = iota + 1
	// BindOutcomeWorkerNotActive: the worker is INACTIVE or CLEANED_UP. The bind raced with its
	// expiry and nobody else will reschedule the attempt, so the activity does it at once.
	BindOutcomeWorkerNotActive
	// BindOutcomeWorkerUnknown: no liveness record (the SDK's worker heartbeats are off). The
	// attempt is left to its timeouts.
	BindOutcomeWorkerUnknown
)

func (o BindOutcome) String() string {
	switch o {
	case BindOutcomeBound:
		return "BOUND"
	case BindOutcomeWorkerNotActive:
		return "WORKER_NOT_ACTIVE"
	case BindOutcomeWorkerUnknown:
		return "WORKER_UNKNOWN"
	}
	return fmt.Sprintf("BindOutcome(%d)", int(o))
}

// WorkerBinder records on a worker's liveness record which attempts it runs (the Worker
// component, on the worker's shard). Neither call renews the worker's lease.
type WorkerBinder interface {
	// BindActivity binds the attempt to the worker, idempotently.
	BindActivity(ctx context.Context, namespaceID, workerInstanceKey string, b Binding) (BindOutcome, error)
	// UnbindActivity removes the attempt's binding (only that stamp's), idempotently; an
	// unknown worker is not an error.
	UnbindActivity(ctx context.Context, namespaceID, workerInstanceKey string, b Binding) error
}

// CommandSender delivers worker commands through the worker's control queue (matching).
type CommandSender interface {
	// SendCancelActivity queues a CancelActivity command carrying the attempt's task token on
	// controlQueue, the worker_control_task_queue its poll named. Best effort.
	SendCancelActivity(ctx context.Context, namespaceID, controlQueue string, taskToken []byte) error
}

// RemoteWorkerBinder is a WorkerBinder over the history RPC: it calls
// WorkerHistoryService.UpdateBindings on the host that owns the worker's shard.
type RemoteWorkerBinder struct {
	Router chasm.ShardConnector
}

var _ WorkerBinder = (*RemoteWorkerBinder)(nil)

// BindActivity implements WorkerBinder.
func (r *RemoteWorkerBinder) BindActivity(ctx context.Context, namespaceID, workerInstanceKey string, b Binding) (BindOutcome, error) {
	resp, err := r.update(ctx, &workerpb.UpdateBindingsRequest{
		NamespaceId: namespaceID, WorkerInstanceKey: workerInstanceKey,
		Bound: []*workerpb.ActivityBinding{{ActivityId: b.ActivityID, RunId: b.RunID, Stamp: b.Stamp}},
	})
	if err != nil {
		return 0, err
	}
	switch resp.GetOutcome() {
	case workerpb.BindOutcome_BIND_OUTCOME_APPLIED:
		return BindOutcomeBound, nil
	case workerpb.BindOutcome_BIND_OUTCOME_WORKER_NOT_ACTIVE:
		return BindOutcomeWorkerNotActive, nil
	case workerpb.BindOutcome_BIND_OUTCOME_WORKER_UNKNOWN:
		return BindOutcomeWorkerUnknown, nil
	}
	return 0, serviceerror.NewInternal(fmt.Sprintf("UpdateBindings answered %v", resp.GetOutcome()))
}

// UnbindActivity implements WorkerBinder.
func (r *RemoteWorkerBinder) UnbindActivity(ctx context.Context, namespaceID, workerInstanceKey string, b Binding) error {
	_, err := r.update(ctx, &workerpb.UpdateBindingsRequest{
		NamespaceId: namespaceID, WorkerInstanceKey: workerInstanceKey,
		Unbound: []*workerpb.ActivityBinding{{ActivityId: b.ActivityID, RunId: b.RunID, Stamp: b.Stamp}},
	})
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil
	}
	return err
}

func (r *RemoteWorkerBinder) update(ctx context.Context, req *workerpb.UpdateBindingsRequest) (*workerpb.UpdateBindingsResponse, error) {
	conn, err := r.Router.ConnFor(req.GetNamespaceId(), req.GetWorkerInstanceKey())
	if err != nil {
		return nil, err
	}
	return workerpb.NewWorkerHistoryServiceClient(conn).UpdateBindings(ctx, req)
}
