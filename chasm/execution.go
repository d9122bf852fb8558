package chasm

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/common/visibility"
)

// ErrTaskNotValid is returned by Execution.ExecutePureTask when the task's validator says it is
// stale (it already ran, or the state moved on). Engines drop such a task.
var ErrTaskNotValid = errors.New("chasm: task is no longer valid")

// ErrPureTaskStillValid is returned when a pure task's validator still holds after the task
// ran. Left alone, such a task would run forever; engines drop it and report the bug.
var ErrPureTaskStillValid = errors.New("chasm: pure task is still valid after it ran")

// Execution is the in-memory form of one execution, shared by every engine so that library
// code runs identically under the durable host and under chasmtest. It is not safe for
// concurrent use: the engine serialises calls with the execution's lock.
//
// Every change goes through a transaction that yields a Mutation; the engine persists the
// mutation and only then calls Apply. Until Apply, the execution still shows the committed
// state, so a failed write leaves nothing half-applied.
type Execution struct {
	registry  *Registry
	component *RegistrableComponent
	key       ExecutionKey

	started bool
	state   proto.Message
	// encoded is state as the store holds it, from the load or the last Apply: Persisted
	// hands it out instead of encoding the state again. The committed state is never changed
	// in place (a transaction works on a copy, a read must not modify it), so it stays true
	// until the next Apply.
	encoded     []byte
	lifecycle   LifecycleState
	indexed     IndexedFields
	collections map[string]map[string][]byte

	// changed is closed and replaced by every Apply, waking PollComponent waiters.
	changed chan struct{}

	// recoveredAt is what Context.RecoveredAt reports (SetRecoveredAt).
	recoveredAt time.Time
}

// NewExecution returns an execution that does not exist yet; Start creates it.
func NewExecution(registry *Registry, component *RegistrableComponent, key ExecutionKey) *Execution {
	return &Execution{
		registry:    registry,
		component:   component,
		key:         key,
		collections: make(map[string]map[string][]byte),
		changed:     make(chan struct{}),
	}
}

// CollectionEntry is one persisted entry of a component collection.
type CollectionEntry struct {
	Collection string
	Key        string
	Value      []byte
}

// CollectionEntryKey names an entry to delete.
type CollectionEntryKey struct {
	Collection string
	Key        string
}

// LoadExecution rebuilds an execution from its persisted form. A state that does not decode is
// an error naming the execution, never a panic.
func LoadExecution(
	registry *Registry, component *RegistrableComponent, key ExecutionKey, state []byte, entries []CollectionEntry,
) (*Execution, error) {
	e := NewExecution(registry, component, key)
	msg := component.newState()
	if err := proto.Unmarshal(state, msg); err != nil {
		return nil, fmt.Errorf("chasm: execution %s (%s): corrupt state: %w", key, component.fullName, err)
	}
	e.started = true
	e.state, e.encoded = msg, state
	c := component.fromState(msg)
	e.lifecycle = c.LifecycleState()
	if ic, ok := c.(IndexedComponent); ok {
		e.indexed = ic.IndexedFields()
	}
	for _, entry := range entries {
		if e.collections[entry.Collection] == nil {
			e.collections[entry.Collection] = make(map[string][]byte)
		}
		e.collections[entry.Collection][entry.Key] = entry.Value
	}
	return e, nil
}

// SetStoredIndexed records the indexed fields as the store holds them. Engines call it after
// LoadExecution, so that Indexed() compares a new value with what is stored, not with what the
// component would compute today (a release may change how it derives them).
func (e *Execution) SetStoredIndexed(f IndexedFields) { e.indexed = f }

// SetRecoveredAt records when the engine may last have lost deferred writes of the execution
// (Context.RecoveredAt).
func (e *Execution) SetRecoveredAt(t time.Time) { e.recoveredAt = t }

// Key returns the execution's key.
func (e *Execution) Key() ExecutionKey { return e.key }

// Archetype returns the registration of the execution's root component.
func (e *Execution) Archetype() *RegistrableComponent { return e.component }

// Ref returns a reference to the execution's root component.
func (e *Execution) Ref() ComponentRef {
	return ComponentRef{Archetype: e.component.fullName, Key: e.key}
}

// Started reports whether the execution exists (was started or loaded).
func (e *Execution) Started() bool { return e.started }

// Lifecycle returns the committed lifecycle state.
func (e *Execution) Lifecycle() LifecycleState { return e.lifecycle }

// Indexed returns the committed indexed fields.
func (e *Execution) Indexed() IndexedFields { return e.indexed }

// Visibility returns the committed state's visibility record: nil unless the execution exists
// and its component is a VisibilityComponent.
func (e *Execution) Visibility() *visibility.Record {
	if !e.started {
		return nil
	}
	if vc, ok := e.component.fromState(e.state).(VisibilityComponent); ok {
		return vc.Visibility()
	}
	return nil
}

// CollectionLen returns the number of committed entries in a collection.
func (e *Execution) CollectionLen(name string) int { return len(e.collections[name]) }

// RangeCollection calls fn for every committed entry of a collection, in no particular order,
// until fn returns false. Values are shared, not copied: fn must not modify them. Engines use
// it to store a collection in their own layout.
func (e *Execution) RangeCollection(name string, fn func(key string, value []byte) bool) {
	for key, value := range e.collections[name] {
		if !fn(key, value) {
			return
		}
	}
}

// Changed returns a channel closed by the next Apply.
func (e *Execution) Changed() <-chan struct{} { return e.changed }

// WakePollers wakes the pollers of an Execution the engine drops without applying a mutation (a
// write failed and its outcome is unknown): they re-read, and wait on what replaces it.
func (e *Execution) WakePollers() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// Mutation is the outcome of a successful transaction, ready to be persisted. It carries the
// whole new state message (small by design) and only the collection entries that changed.
type Mutation struct {
	exec *Execution

	// Created is true for the transaction that started the execution.
	Created bool
	// Deleted is true for a transaction that deletes the execution (DeleteExecution): it
	// carries no state, tasks or collection changes.
	Deleted bool
	// State is the deterministic encoding of the new state message; nil when Deferred (the
	// engine does not write it now), until a commit observer asks for it (Commit.Encoded) or
	// Execution.PersistedState encodes it.
	State     []byte
	Lifecycle LifecycleState
	Indexed   IndexedFields
	// Visibility is the new state's record, for a VisibilityComponent (nil otherwise).
	Visibility *visibility.Record

	CollectionPuts    []CollectionEntry
	CollectionDeletes []CollectionEntryKey
	// Tasks added by the transaction, in the order they were added.
	Tasks []*Task
	// Deferred is set when the component asked for DeferWrite and the change is of the state
	// alone: the engine may Apply it without writing it, and must then write the state with
	// the execution's next written mutation (which carries the whole state anyway).
	Deferred bool
	// Postponed are the transaction's PostponeTimer calls, for timers it did not replace: the
	// engine may hold each pending timer in memory until its time once the mutation is
	// committed, and releases the holds of an earlier mutation that this one does not restate.
	Postponed []Postponement

	stateMsg proto.Message
}

// Postponement is a PostponeTimer call: the execution's pending timer of Type would only defer
// itself if it ran before Until.
type Postponement struct {
	Type  *RegistrableTask
	Until time.Time
}

// Start runs the transaction that creates the execution: newFn builds the component, and the
// optional then (UpdateWithStart) runs on it in the same transaction.
func (e *Execution) Start(
	now time.Time,
	newFn func(MutableContext) (Component, error),
	then func(MutableContext, Component) error,
) (*Mutation, error) {
	if e.started {
		return nil, fmt.Errorf("chasm: execution %s already exists", e.key)
	}
	t := newTransaction(e, now, true)
	c, err := newFn(t)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("chasm: %s: constructor returned no component", e.component.fullName)
	}
	if then != nil {
		if err := then(t, c); err != nil {
			return nil, err
		}
	}
	m, err := e.finish(t, c)
	if err != nil {
		return nil, err
	}
	m.Created = true
	return m, nil
}

// Update runs fn as one transaction on a private copy of the committed state.
func (e *Execution) Update(now time.Time, fn func(MutableContext, Component) error) (*Mutation, error) {
	if !e.started {
		return nil, fmt.Errorf("chasm: execution %s does not exist", e.key)
	}
	t := newTransaction(e, now, true)
	// A copy: a transaction that fails leaves the committed state as it was.
	c := e.component.fromState(e.copyState())
	check := e.checkCopyOnWrite()
	err := fn(t, c)
	if check != nil {
		err = cmp.Or(check(), err)
	}
	if err != nil {
		return nil, err
	}
	return e.finish(t, c)
}

// Read runs fn against the committed state. fn must not modify the component.
func (e *Execution) Read(now time.Time, fn func(Context, Component) error) error {
	if !e.started {
		return fmt.Errorf("chasm: execution %s does not exist", e.key)
	}
	t := newTransaction(e, now, false)
	if err := fn(t, e.component.fromState(e.state)); err != nil {
		return err
	}
	return t.err
}

// ValidateTask runs the task's validator against the committed state.
func (e *Execution) ValidateTask(now time.Time, task *Task) (bool, error) {
	var valid bool
	err := e.Read(now, func(ctx Context, c Component) error {
		var err error
		valid, err = task.Type.validate(ctx, c, task.Attributes, task.Payload)
		return err
	})
	return valid, err
}

// ExecutePureTask validates and runs a pure task as one transaction. It returns
// ErrTaskNotValid for a stale task, and ErrPureTaskStillValid (with no mutation) if the task
// did not invalidate itself.
func (e *Execution) ExecutePureTask(now time.Time, task *Task) (*Mutation, error) {
	if !task.Type.pure {
		return nil, fmt.Errorf("chasm: task %s is not pure", task.Type.fullName)
	}
	return e.Update(now, func(ctx MutableContext, c Component) error {
		valid, err := task.Type.validate(ctx, c, task.Attributes, task.Payload)
		if err != nil {
			return fmt.Errorf("validate %s: %w", task.Type.fullName, err)
		}
		if !valid {
			return ErrTaskNotValid
		}
		if err := task.Type.executePure(ctx, c, task.Attributes, task.Payload); err != nil {
			return err
		}
		if ctx.txn().deleteExecution {
			return nil // the task goes with the execution
		}
		stillValid, err := task.Type.validate(ctx, c, task.Attributes, task.Payload)
		if err != nil {
			return fmt.Errorf("validate %s after execution: %w", task.Type.fullName, err)
		}
		if stillValid {
			return fmt.Errorf("%w: %s on %s", ErrPureTaskStillValid, task.Type.fullName, e.key)
		}
		return nil
	})
}

func (e *Execution) finish(t *transaction, c Component) (*Mutation, error) {
	if t.err != nil {
		return nil, t.err
	}
	if t.deleteExecution {
		if !e.started {
			return nil, fmt.Errorf("chasm: execution %s: the transaction that creates it cannot delete it", e.key)
		}
		if len(t.tasks) > 0 || len(t.puts) > 0 || len(t.deletes) > 0 {
			return nil, fmt.Errorf("chasm: execution %s: a transaction that deletes its execution cannot add tasks or change collections", e.key)
		}
		return &Mutation{exec: e, Deleted: true, Lifecycle: c.LifecycleState(), stateMsg: c.State()}, nil
	}
	if tc, ok := c.(TransitionCountingComponent); ok && e.changedBy(t, c) {
		// Before the encoding, so that the count is written with the change it counts.
		tc.CountStateTransition()
	}
	state := c.State()
	m := &Mutation{
		exec:      e,
		Lifecycle: c.LifecycleState(),
		Tasks:     t.tasks,
		stateMsg:  state,
	}
	if ic, ok := c.(IndexedComponent); ok {
		m.Indexed = ic.IndexedFields()
	}
	if vc, ok := c.(VisibilityComponent); ok {
		m.Visibility = vc.Visibility()
	}
	m.Deferred = t.deferWrite && e.started && len(t.tasks) == 0 && len(t.puts) == 0 && len(t.deletes) == 0 &&
		m.Lifecycle == e.lifecycle && m.Indexed == e.indexed && (m.Visibility == nil || m.Visibility.Equal(e.Visibility()))
	// A deferred change is not written now: its state is encoded when something needs the
	// bytes (the next write, the cache keeping the run encoded, a commit observer asking for
	// them), at most once, and a run that is changed again first is never encoded in between.
	if !m.Deferred {
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(state)
		if err != nil {
			return nil, fmt.Errorf("chasm: execution %s: encode state: %w", e.key, err)
		}
		m.State = data
	}
	for _, p := range t.postponed {
		if !slices.ContainsFunc(t.tasks, func(task *Task) bool { return task.Type == p.Type }) {
			m.Postponed = append(m.Postponed, p)
		}
	}
	for name, entries := range t.puts {
		for key, value := range entries {
			m.CollectionPuts = append(m.CollectionPuts, CollectionEntry{Collection: name, Key: key, Value: value})
		}
	}
	for name, keys := range t.deletes {
		for key := range keys {
			m.CollectionDeletes = append(m.CollectionDeletes, CollectionEntryKey{Collection: name, Key: key})
		}
	}
	// Map order is random; a stable order keeps writes reproducible.
	slices.SortFunc(m.CollectionPuts, func(a, b CollectionEntry) int {
		return cmp.Or(cmp.Compare(a.Collection, b.Collection), cmp.Compare(a.Key, b.Key))
	})
	slices.SortFunc(m.CollectionDeletes, func(a, b CollectionEntryKey) int {
		return cmp.Or(cmp.Compare(a.Collection, b.Collection), cmp.Compare(a.Key, b.Key))
	})
	return m, nil
}

// changedBy reports whether transaction t, which ends with component c, changes the
// execution: it creates it, adds a task, touches a collection, or leaves a state that differs
// from the committed one. A transaction that only answers from the state (a retried request
// that finds its work done) is still written, but changes nothing and is not counted as a
// state transition. The state comparison runs only for a transition-counting component and
// only when nothing else already showed a change.
func (e *Execution) changedBy(t *transaction, c Component) bool {
	if !e.started || len(t.tasks) > 0 || len(t.puts) > 0 || len(t.deletes) > 0 {
		return true
	}
	return !proto.Equal(c.State(), e.state)
}

// Apply makes a persisted mutation the committed state and wakes pollers. Call it only after
// the mutation is durable, and only with a mutation of this execution made since the last
// Apply.
func (e *Execution) Apply(m *Mutation) {
	if m.exec != e {
		panic("chasm: Apply with a mutation of another execution")
	}
	e.observe(m)
	if m.Deleted {
		// The engine drops this Execution; pollers wake and find the key gone.
		e.started = false
		close(e.changed)
		e.changed = make(chan struct{})
		return
	}
	e.started = true
	// After observe: an observer that asked for a deferred state's bytes (Commit.Encoded)
	// left them in m.State, and the execution keeps them rather than encoding again.
	e.state, e.encoded = m.stateMsg, m.State
	e.lifecycle = m.Lifecycle
	e.indexed = m.Indexed
	for _, entry := range m.CollectionPuts {
		if e.collections[entry.Collection] == nil {
			e.collections[entry.Collection] = make(map[string][]byte)
		}
		e.collections[entry.Collection][entry.Key] = entry.Value
	}
	for _, k := range m.CollectionDeletes {
		delete(e.collections[k.Collection], k.Key)
	}
	close(e.changed)
	e.changed = make(chan struct{})
}

// PersistedState returns the state as Persisted does, without the collections.
func (e *Execution) PersistedState() ([]byte, error) {
	if e.encoded != nil {
		return e.encoded, nil
	}
	state, err := (proto.MarshalOptions{Deterministic: true}).Marshal(e.state)
	if err != nil {
		return nil, fmt.Errorf("chasm: execution %s: encode state: %w", e.key, err)
	}
	return state, nil
}

// Persisted returns the execution in the form the store keeps it, from which LoadExecution
// rebuilds it (then SetStoredIndexed with Indexed()). An engine may hold this instead of the
// execution while it is idle: the encoded state is a fraction of the decoded message's size.
// Collection values are shared, not copied; they are never modified in place.
func (e *Execution) Persisted() (state []byte, entries []CollectionEntry, err error) {
	if state, err = e.PersistedState(); err != nil {
		return nil, nil, err
	}
	n := 0
	for _, c := range e.collections {
		n += len(c)
	}
	if n > 0 {
		entries = make([]CollectionEntry, 0, n)
		for name, c := range e.collections {
			for key, value := range c {
				entries = append(entries, CollectionEntry{Collection: name, Key: key, Value: value})
			}
		}
	}
	return state, entries, nil
}
