package chasm

import (
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/common/visibility"
)

// Component is the root of an execution. A component value is a view over its state message:
// engines build a fresh one for every transaction from a private copy of the committed state,
// so a transaction that fails leaves the committed state untouched.
type Component interface {
	// State returns the one protobuf message that holds the component's persisted state.
	State() proto.Message
	// LifecycleState reports whether the execution is still running.
	LifecycleState() LifecycleState
}

// IndexedComponent is implemented by components that want to be listed and filtered by the
// engine's indexed fields.
type IndexedComponent interface {
	Component
	IndexedFields() IndexedFields
}

// VisibilityComponent is implemented by components whose executions list through a visibility
// query: the engine stores the record in the same transaction as the state, whenever it
// changes, and its listings filter, sort and page by it.
type VisibilityComponent interface {
	Component
	// Visibility derives the record from the component's state alone (never the clock), so
	// that the same state always gives the same record.
	Visibility() *visibility.Record
}

// TransitionCountingComponent is implemented by components that count the committed
// transactions that changed them (Temporal's state_transition_count). The engine, not library
// code, calls CountStateTransition: on the transaction's private copy, once per transaction it
// is about to persist that changes the execution (the one that creates it included), after
// the transaction's code ran. So every path that changes the execution counts, whether a
// request, a pure task or a side-effect task's update, and nothing else does: a read, a
// transaction that returns an error (it writes nothing), one that changes nothing (a retried
// request answered from the state), and a write that fails (its copy is dropped, and the
// committed state, or the store's on reload, keeps the old count).
type TransitionCountingComponent interface {
	Component
	// CountStateTransition adds one to the count kept in the component's state message.
	CountStateTransition()
}

// IndexedFields are the small set of values an engine indexes for listing.
type IndexedFields struct {
	Status    string
	TaskQueue string
}

// LifecycleState is an execution's coarse state, used by ID-reuse decisions.
type LifecycleState int

const (
	LifecycleRunning LifecycleState = iota + 1
	LifecycleCompleted
	LifecycleFailed
)

// IsClosed reports whether the execution has finished.
func (s LifecycleState) IsClosed() bool { return s != LifecycleRunning }

func (s LifecycleState) String() string {
	switch s {
	case LifecycleRunning:
		return "Running"
	case LifecycleCompleted:
		return "Completed"
	case LifecycleFailed:
		return "Failed"
	}
	return "Unspecified"
}
