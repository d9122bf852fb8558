package chasm

import "google.golang.org/protobuf/proto"

// CommitObserver sees every committed change of a component's executions: the state before
// (nil for the transaction that created the execution) and after (the last state, with deleted
// set, for the transaction that deleted it). The engine calls it from Execution.Apply, that is
// only once the write is durable, with the execution's lock held: changes of one execution
// arrive in commit order. It must not block and must not modify either state (both may be
// shared with the engine's cache).
type CommitObserver func(key ExecutionKey, before, after proto.Message, deleted bool)

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
	var before proto.Message
	if e.started {
		before = e.state
	}
	fn(e.key, before, m.stateMsg, m.Deleted)
}
