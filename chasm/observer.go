package chasm

import "google.golang.org/protobuf/proto"

// Commit is one committed change of an execution, as a CommitObserver sees it.
type Commit struct {
	Key ExecutionKey
	// Before is the state before the change (nil for the transaction that created the
	// execution), After the state after it (the last state, with Deleted set, for the
	// transaction that deleted the execution).
	Before, After proto.Message
	// Encoded is After as the transaction wrote it to the store: nil when it deleted the
	// execution, and when the change was deferred (Mutation.Deferred), which wrote nothing.
	// The engine's cache holds these same bytes: an observer that keeps the state for later
	// can keep them instead of encoding it again.
	Encoded []byte
	Deleted bool
}

// CommitObserver sees every committed change of a component's executions. The engine calls it
// from Execution.Apply, that is only once the write is durable, with the execution's lock
// held: changes of one execution arrive in commit order. It must not block and must not modify
// the states or the encoded bytes (all are shared with the engine's cache).
type CommitObserver func(Commit)

// WithCommitObserver registers fn as the component's commit observer.
func WithCommitObserver(fn CommitObserver) ComponentOption {
	return func(c *RegistrableComponent) { c.observer = fn }
}

// observe calls the component's observer, if any, for a mutation being applied.
func (e *Execution) observe(m *Mutation) {
	fn := e.component.observer
	if fn == nil {
		return
	}
	c := Commit{Key: e.key, After: m.stateMsg, Encoded: m.State, Deleted: m.Deleted}
	if e.started {
		c.Before = e.state
	}
	fn(c)
}
