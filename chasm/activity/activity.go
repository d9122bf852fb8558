// Package activity is the standalone Activity component: one execution per run of an activity
// ID, started by StartActivityExecution, dispatched to workers through matching, retried per
// its retry policy, bounded by its four timeouts, and, when the worker running it is declared
// lost by the Worker component, rescheduled to a live worker within seconds. Every attempt
// carries a fencing stamp: a worker call that names another stamp is refused, so a dead
// worker's late completion cannot overwrite the work of its successor. See README.md.
package activity

import (
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/common/visibility"
)

// LibraryName qualifies the component and its tasks.
const LibraryName = "activity"

// Archetype is the full name of the Activity component.
const Archetype = LibraryName + ".activity"

const (
	statusUnspecified = activitypb.ActivityStatus_ACTIVITY_STATUS_UNSPECIFIED
	statusScheduled   = activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED
	statusStarted     = activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED
	statusCompleted   = activitypb.ActivityStatus_ACTIVITY_STATUS_COMPLETED
	statusFailed      = activitypb.ActivityStatus_ACTIVITY_STATUS_FAILED
	statusCanceled    = activitypb.ActivityStatus_ACTIVITY_STATUS_CANCELED
	statusTimedOut    = activitypb.ActivityStatus_ACTIVITY_STATUS_TIMED_OUT
	statusTerminated  = activitypb.ActivityStatus_ACTIVITY_STATUS_TERMINATED
	statusPaused      = activitypb.ActivityStatus_ACTIVITY_STATUS_PAUSED
)

// Activity is the component: a view over ActivityState.
type Activity struct {
	*activitypb.ActivityState
}

// State implements chasm.Component.
func (a *Activity) State() proto.Message { return a.ActivityState }

// LifecycleState implements chasm.Component. CANCELED, TIMED_OUT and TERMINATED count as failed, so that
// the ALLOW_DUPLICATE_FAILED_ONLY reuse policy lets them start again, as Temporal does.
func (a *Activity) LifecycleState() chasm.LifecycleState {
	switch a.Status {
	case statusCompleted:
		return chasm.LifecycleCompleted
	case statusFailed, statusCanceled, statusTimedOut, statusTerminated:
		return chasm.LifecycleFailed
	}
	return chasm.LifecycleRunning
}

// IndexedFields implements chasm.IndexedComponent: activities list by status and task queue.
func (a *Activity) IndexedFields() chasm.IndexedFields {
	return chasm.IndexedFields{Status: StatusName(a.Status), TaskQueue: a.TaskQueue}
}

// Visibility implements chasm.VisibilityComponent: what ListActivityExecutions filters, sorts
// and groups by, as the frontend's queries name it (frontend/query: ActivityType, TaskQueue,
// WorkerInstanceKey of the running attempt, the public ExecutionStatus, StartTime (the
// schedule time), ExecutionTime (the schedule time plus the start delay), CloseTime, and the
// custom search attributes the start set).
func (a *Activity) Visibility() *visibility.Record {
	r := &visibility.Record{
		TypeName:   a.GetActivityType().GetName(),
		TaskQueue:  a.GetTaskQueue(),
		Status:     int32(PublicStatus(a.GetStatus())),
		Attributes: visibility.AttributesOf(a.GetSearchAttributes()),
	}
	if a.GetStatus() == statusStarted {
		r.WorkerInstanceKey = a.GetWorkerInstanceKey()
	}
	if t := a.GetScheduleTime(); t != nil {
		r.StartTime = t.AsTime()
		r.ExecutionTime = r.StartTime.Add(a.GetStartDelay().AsDuration())
	}
	if t := a.GetCloseTime(); t != nil {
		r.CloseTime = t.AsTime()
	}
	return r
}

// CountStateTransition implements chasm.TransitionCountingComponent: the engine calls it once
// per committed transaction that changes the activity.
func (a *Activity) CountStateTransition() { a.StateTransitionCount++ }

// StateMachineState implements chasm.StateMachine.
func (a *Activity) StateMachineState() activitypb.ActivityStatus { return a.Status }

// SetStateMachineState implements chasm.StateMachine.
func (a *Activity) SetStateMachineState(s activitypb.ActivityStatus) { a.Status = s }

// IsClosed reports whether the activity reached a terminal status.
func (a *Activity) IsClosed() bool { return a.LifecycleState().IsClosed() }

// StatusName is the short status name used in indexes, logs and metrics.
func StatusName(s activitypb.ActivityStatus) string {
	switch s {
	case statusScheduled:
		return "SCHEDULED"
	case statusStarted:
		return "STARTED"
	case statusCompleted:
		return "COMPLETED"
	case statusFailed:
		return "FAILED"
	case statusCanceled:
		return "CANCELED"
	case statusTimedOut:
		return "TIMED_OUT"
	case statusTerminated:
		return "TERMINATED"
	case statusPaused:
		return "PAUSED"
	}
	return ""
}

// EncodeTaskToken returns the task token of an attempt: the bytes the worker echoes back.
func EncodeTaskToken(t *activitypb.TaskToken) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(t)
}

// DecodeTaskToken parses a task token. The frontend uses it to route a worker's call to the
// shard of the token's activity ID.
func DecodeTaskToken(b []byte) (*activitypb.TaskToken, error) {
	t := &activitypb.TaskToken{}
	if len(b) == 0 {
		return nil, errInvalidToken("empty task token")
	}
	if err := proto.Unmarshal(b, t); err != nil {
		return nil, errInvalidToken("malformed task token: " + err.Error())
	}
	if t.ActivityId == "" || t.RunId == "" || t.Stamp <= 0 {
		return nil, errInvalidToken("task token names no activity attempt")
	}
	return t, nil
}
