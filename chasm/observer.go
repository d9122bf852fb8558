package chasm

import "google.golang.org/protobuf/proto"

// Commit is one committed change of an execution, as a CommitObserver sees it.
type Commit struct {
	Key ExecutionKey
	// Before is the state before the change (nil for the transaction that created the
	// execution), After the state after it (the last state, with Deleted set, for the
	// transaction that deleted the execution).
	Before, After proto.Message
	Deleted       bool

	m *Mutation
}

// Encoded returns After as the store keeps it: the bytes the transaction wrote, or, for a
// change that wrote nothing (Mutation.Deferred), After encoded now, once, and kept for the
// engine, whose cache would otherwise encode it again. An observer that keeps the state for
// later can keep these bytes (read-only) instead of encoding it itself. Nil for a deletion,
// and in the impossible case that a committed state does not encode.
func (c Commit) Encoded() []byte {
	if c.m == nil || c.m.Deleted {
		return nil
	}
	if c.m.State == nil {
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(c.m.stateMsg)
		if err != nil {
			return nil
		}
		c.m.State = data
	}
	return c.m.State
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
	c := Commit{Key: e.key, After: m.stateMsg, Deleted: m.Deleted, m: m}
	if e.started {
		c.Before = e.state
	}
	fn(c)
}
