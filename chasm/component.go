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
