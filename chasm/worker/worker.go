// Package worker is the Worker liveness component: a durable, server-clock lease per worker
// (identified by its WorkerInstanceKey), renewed by heartbeats. When the lease runs out the
// worker becomes INACTIVE at once and the activities bound to it are rescheduled on their own
// shards; a worker that comes back while INACTIVE is resurrected; after the namespace's
// InactiveWorkerCleanupDelay it is CLEANED_UP for good, and its record is deleted after
// worker.cleanedUpRetention. See README.md for the lifecycle.
package worker

import (
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// LibraryName qualifies the component and its tasks.
const LibraryName = "worker"

// Archetype is the full name of the Worker component.
const Archetype = LibraryName + ".worker"

// BoundActivities holds the activity attempts running on the worker, keyed by BindingKey.
// It lives beside the state so a plain heartbeat never rewrites it.
var BoundActivities = chasm.NewCollection[*workerpb.BoundActivity]("bound_activities")

// Worker is the component: a view over WorkerState.
type Worker struct {
	*workerpb.WorkerState
}

// NewWorker returns a worker not yet registered (UNSPECIFIED): the transaction that creates it
// applies its first event.
func NewWorker(namespace string) *Worker {
	return &Worker{WorkerState: &workerpb.WorkerState{Namespace: namespace}}
}

// State implements chasm.Component.
func (w *Worker) State() proto.Message { return w.WorkerState }

// LifecycleState implements chasm.Component: only CLEANED_UP is closed.
func (w *Worker) LifecycleState() chasm.LifecycleState {
	if w.Status == workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP {
		return chasm.LifecycleCompleted
	}
	return chasm.LifecycleRunning
}

// IndexedFields implements chasm.IndexedComponent: workers list by status and task queue.
func (w *Worker) IndexedFields() chasm.IndexedFields {
	return chasm.IndexedFields{Status: StatusName(w.Status), TaskQueue: w.GetLastHeartbeat().GetTaskQueue()}
}

// StateMachineState implements chasm.StateMachine.
func (w *Worker) StateMachineState() workerpb.WorkerStatus { return w.Status }

// SetStateMachineState implements chasm.StateMachine.
func (w *Worker) SetStateMachineState(s workerpb.WorkerStatus) { w.Status = s }

// StatusName is the short status name used in indexes and filters: ACTIVE, INACTIVE,
// CLEANED_UP.
func StatusName(s workerpb.WorkerStatus) string {
	switch s {
	case workerpb.WorkerStatus_WORKER_STATUS_ACTIVE:
		return "ACTIVE"
	case workerpb.WorkerStatus_WORKER_STATUS_INACTIVE:
		return "INACTIVE"
	case workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP:
		return "CLEANED_UP"
	}
	return ""
}

// BindingKey is the collection key of an activity attempt: unambiguous whatever the IDs
// contain (the length prefix delimits the activity ID).
func BindingKey(activityID, runID string) string {
	return strconv.Itoa(len(activityID)) + ":" + activityID + "/" + runID
}
