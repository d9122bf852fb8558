// Package chasmtest is an in-memory chasm.Engine with a fake clock, for unit tests of
// component libraries.
//
// Time stands still until the test moves it. AdvanceTime fires the pure timer tasks that came
// due, in (time, creation) order, exactly as the durable host would; side-effect tasks wait
// until the test inspects and runs them, so a test can decide what a remote shard answers.
// The engine fails the test when a task stays valid after it ran: that bug stalls or loops a
// real execution, so it is caught here first.
package chasmtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/clock"
)

// Engine is an in-memory chasm.Engine. It is safe for concurrent use and locks each business
// ID separately, like the durable engine, so tests of concurrent updates mean something.
type Engine struct {
	t        testing.TB
	registry *chasm.Registry
	clock    *clock.FakeTimeSource

	mu       sync.Mutex
	slots    map[slotKey]*slot
	pending  []*ScheduledTask
	nextSeq  int64
	pruned   int
	executed int
	deferred int
	gated    int
}

type slotKey struct {
	archetype   string
	namespaceID string
	businessID  string
}

// slot holds every run of one business ID, under one lock: this is what makes
// create-or-update atomic.
type slot struct {
	mu      sync.Mutex
	current string
	runs    map[string]*chasm.Execution
}

// ScheduledTask is a task waiting in the engine.
type ScheduledTask struct {
	Ref  chasm.ComponentRef
	Task *chasm.Task
	seq  int64
	// deferredUntil is set when the executor deferred the task (chasm.DeferTask).
	deferredUntil time.Time
}

func (s *ScheduledTask) String() string {
	return fmt.Sprintf("%s on %s at %v", s.Task.Type.FullName(), s.Ref, s.Task.Attributes)
}

// NewEngine returns an engine over registry whose clock starts at a fixed instant.
func NewEngine(t testing.TB, registry *chasm.Registry) *Engine {
	return &Engine{
		t:        t,
		registry: registry,
		clock:    clock.NewFakeTimeSource(),
		slots:    make(map[slotKey]*slot),
	}
}

// NewRegistry registers libs into a new registry, failing the test on error.
func NewRegistry(t testing.TB, libs ...chasm.Library) *chasm.Registry {
	t.Helper()
	r := chasm.NewRegistry()
	for _, lib := range libs {
		if err := r.Register(lib); err != nil {
			t.Fatalf("register library %s: %v", lib.Name(), err)
		}
	}
	return r
}

var _ chasm.Engine = (*Engine)(nil)

// Registry implements chasm.Engine.
func (e *Engine) Registry() *chasm.Registry { return e.registry }

// Clock returns the engine's fake clock. Prefer AdvanceTime, which also fires due tasks.
func (e *Engine) Clock() *clock.FakeTimeSource { return e.clock }

// Now returns the engine's current time.
func (e *Engine) Now() time.Time { return e.clock.Now() }

// StartExecution implements chasm.Engine.
func (e *Engine) StartExecution(
	_ context.Context, ref chasm.ComponentRef, newFn func(chasm.MutableContext) (chasm.Component, error), opts chasm.StartOptions,
) (chasm.StartResult, error) {
	rc, err := e.component(ref)
	if err != nil {
		return chasm.StartResult{}, err
	}
	s := e.slot(ref)
	s.mu.Lock()
	defer s.mu.Unlock()

	currentRunID, lifecycle := s.currentRun()
	existing, err := chasm.CheckStart(ref, opts, currentRunID, lifecycle)
	if err != nil {
		return chasm.StartResult{}, err
	}
	if existing != "" {
		return chasm.StartResult{RunID: existing}, nil
	}
	return e.create(s, rc, ref, newFn, nil)
}

// UpdateWithStart implements chasm.Engine.
func (e *Engine) UpdateWithStart(
	_ context.Context, ref chasm.ComponentRef,
	newFn func(chasm.MutableContext) (chasm.Component, error), updateFn func(chasm.MutableContext, chasm.Component) error,
) (chasm.StartResult, error) {
	rc, err := e.component(ref)
	if err != nil {
		return chasm.StartResult{}, err
	}
	s := e.slot(ref)
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.current == "" {
		return e.create(s, rc, ref, newFn, updateFn)
	}
	exec := s.runs[s.current]
	m, err := exec.Update(e.clock.Now(), updateFn)
	if err != nil {
		return chasm.StartResult{}, err
	}
	e.commit(exec, m)
	return chasm.StartResult{RunID: s.current}, nil
}

// UpdateComponent implements chasm.Engine.
func (e *Engine) UpdateComponent(
	_ context.Context, ref chasm.ComponentRef, updateFn func(chasm.MutableContext, chasm.Component) error,
) error {
	s, exec, err := e.lockExecution(ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	m, err := exec.Update(e.clock.Now(), updateFn)
	if err != nil {
		return err
	}
	e.commit(exec, m)
	return nil
}

// ReadComponent implements chasm.Engine.
func (e *Engine) ReadComponent(
	_ context.Context, ref chasm.ComponentRef, readFn func(chasm.Context, chasm.Component) error,
) error {
	s, exec, err := e.lockExecution(ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	return exec.Read(e.clock.Now(), readFn)
}

// PollComponent implements chasm.Engine.
func (e *Engine) PollComponent(
	ctx context.Context, ref chasm.ComponentRef, predicate func(chasm.Context, chasm.Component) (bool, error),
) error {
	for {
		s, exec, err := e.lockExecution(ref)
		if err != nil {
			return err
		}
		var done bool
		err = exec.Read(e.clock.Now(), func(rctx chasm.Context, c chasm.Component) error {
			var err error
			done, err = predicate(rctx, c)
			return err
		})
		changed := exec.Changed()
		s.mu.Unlock()
		if err != nil || done {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// AdvanceTime moves the clock forward by d and fires every pure timer task that comes due.
func (e *Engine) AdvanceTime(d time.Duration) {
	e.t.Helper()
	e.clock.Advance(d)
	e.FireDueTasks()
}

// FireDueTasks runs every pure timer task due at the current time, including tasks those
// tasks add, earliest first.
func (e *Engine) FireDueTasks() {
	e.t.Helper()
	for {
		st := e.popDuePureTask()
		if st == nil {
			return
		}
		e.firePure(st)
	}
}

// PendingTimers returns the timer tasks not yet run (pure and side-effect), earliest first.
func (e *Engine) PendingTimers() []*ScheduledTask {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*ScheduledTask
	for _, st := range e.pending {
		if st.Task.Attributes.IsTimer() {
			out = append(out, st)
		}
	}
	return out
}

// PendingTasksOfType returns the pending tasks of one type (by full name), in order.
func (e *Engine) PendingTasksOfType(fullName string) []*ScheduledTask {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*ScheduledTask
	for _, st := range e.pending {
		if st.Task.Type.FullName() == fullName {
			out = append(out, st)
		}
	}
	return out
}

// SideEffectTasks returns the side-effect tasks that are ready to run: every outbound task and
// every side-effect timer that is due.
func (e *Engine) SideEffectTasks() []*ScheduledTask {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	var out []*ScheduledTask
	for _, st := range e.pending {
		if st.Task.Type.IsPure() {
			continue
		}
		if st.Task.Attributes.IsTimer() && st.Task.Attributes.ScheduledTime.After(now) {
			continue
		}
		out = append(out, st)
	}
	return out
}

// RunSideEffectTask validates and runs one side-effect task. A task that is no longer valid is
// dropped without running. A task whose executor fails stays pending and the error is
// returned, as the durable host would retry it.
func (e *Engine) RunSideEffectTask(ctx context.Context, st *ScheduledTask) error {
	e.t.Helper()
	valid, err := e.validate(st)
	if err != nil {
		return err
	}
	if !valid {
		e.remove(st, true)
		return nil
	}
	if err := st.Task.Type.ExecuteSideEffect(chasm.NewEngineContext(ctx, e), st.Ref, st.Task); err != nil {
		return err
	}
	e.remove(st, false)
	stillValid, err := e.validate(st)
	if err != nil {
		return err
	}
	if stillValid {
		e.t.Errorf("chasmtest: side-effect task %s is still valid after it ran: a redelivery would run it again", st)
	}
	return nil
}

// RunSideEffectTasks runs every ready side-effect task once, returning the errors joined.
func (e *Engine) RunSideEffectTasks(ctx context.Context) error {
	e.t.Helper()
	var errs []error
	for _, st := range e.SideEffectTasks() {
		if err := e.RunSideEffectTask(ctx, st); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", st, err))
		}
	}
	return errors.Join(errs...)
}

// PrunedTasks returns how many tasks were dropped because their validator said they were
// stale.
func (e *Engine) PrunedTasks() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pruned
}

// CollectionLen returns the committed size of a collection of the execution at ref.
func (e *Engine) CollectionLen(ref chasm.ComponentRef, name string) (int, error) {
	s, exec, err := e.lockExecution(ref)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return exec.CollectionLen(name), nil
}

func (e *Engine) component(ref chasm.ComponentRef) (*chasm.RegistrableComponent, error) {
	rc, ok := e.registry.Component(ref.Archetype)
	if !ok {
		return nil, fmt.Errorf("chasmtest: archetype %q is not registered", ref.Archetype)
	}
	return rc, nil
}

func (e *Engine) slot(ref chasm.ComponentRef) *slot {
	key := slotKey{archetype: ref.Archetype, namespaceID: ref.Key.NamespaceID, businessID: ref.Key.BusinessID}
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.slots[key]
	if !ok {
		s = &slot{runs: make(map[string]*chasm.Execution)}
		e.slots[key] = s
	}
	return s
}

func (s *slot) currentRun() (string, chasm.LifecycleState) {
	if s.current == "" {
		return "", 0
	}
	return s.current, s.runs[s.current].Lifecycle()
}

// lockExecution returns the execution at ref with its slot locked.
func (e *Engine) lockExecution(ref chasm.ComponentRef) (*slot, *chasm.Execution, error) {
	if _, err := e.component(ref); err != nil {
		return nil, nil, err
	}
	s := e.slot(ref)
	s.mu.Lock()
	runID := ref.Key.RunID
	if runID == "" {
		runID = s.current
	}
	exec, ok := s.runs[runID]
	if !ok {
		s.mu.Unlock()
		return nil, nil, chasm.NewExecutionNotFoundError(ref)
	}
	return s, exec, nil
}

func (e *Engine) create(
	s *slot, rc *chasm.RegistrableComponent, ref chasm.ComponentRef,
	newFn func(chasm.MutableContext) (chasm.Component, error), then func(chasm.MutableContext, chasm.Component) error,
) (chasm.StartResult, error) {
	key := ref.Key
	key.RunID = uuid.NewString()
	exec := chasm.NewExecution(e.registry, rc, key)
	m, err := exec.Start(e.clock.Now(), newFn, then)
	if err != nil {
		return chasm.StartResult{}, err
	}
	s.runs[key.RunID] = exec
	s.current = key.RunID
	e.commit(exec, m)
	return chasm.StartResult{RunID: key.RunID, Created: true}, nil
}

// commit applies a mutation and queues its tasks. Payloads go through their wire encoding, as
// they would through the store, so a task that cannot be persisted fails here too.
func (e *Engine) commit(exec *chasm.Execution, m *chasm.Mutation) {
	e.t.Helper()
	exec.Apply(m)
	ref := exec.Ref()
	if m.Deleted {
		// The caller holds the slot's lock; the store would drop the run's tasks with it.
		s := e.slot(ref)
		delete(s.runs, ref.Key.RunID)
		if s.current == ref.Key.RunID {
			s.current = ""
		}
		e.mu.Lock()
		e.pending = slices.DeleteFunc(e.pending, func(st *ScheduledTask) bool { return st.Ref == ref })
		e.mu.Unlock()
		return
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	for _, task := range m.Tasks {
		data, err := task.MarshalPayload()
		if err != nil {
			e.t.Errorf("chasmtest: encode %s payload: %v", task.Type.FullName(), err)
			continue
		}
		payload, err := task.Type.UnmarshalPayload(data)
		if err != nil {
			e.t.Errorf("chasmtest: %v", err)
			continue
		}
		if task.Type.IsSingletonTimer() {
			e.pending = slices.DeleteFunc(e.pending, func(st *ScheduledTask) bool {
				return st.Ref == ref && st.Task.Type == task.Type
			})
		}
		e.nextSeq++
		e.pending = append(e.pending, &ScheduledTask{
			Ref:  ref,
			Task: &chasm.Task{Type: task.Type, Attributes: task.Attributes, Payload: payload},
			seq:  e.nextSeq,
		})
	}
}

func (e *Engine) popDuePureTask() *ScheduledTask {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	var best *ScheduledTask
	for _, st := range e.pending {
		if !st.Task.Type.IsPure() || st.Task.Attributes.ScheduledTime.After(now) || st.deferredUntil.After(now) {
			continue
		}
		if best == nil || cmp.Or(
			st.Task.Attributes.ScheduledTime.Compare(best.Task.Attributes.ScheduledTime),
			cmp.Compare(st.seq, best.seq)) < 0 {
			best = st
		}
	}
	if best != nil {
		e.pending = slices.DeleteFunc(e.pending, func(st *ScheduledTask) bool { return st == best })
	}
	return best
}

func (e *Engine) firePure(st *ScheduledTask) {
	e.t.Helper()
	if until, deferred := st.Task.Type.Gate(st.Ref.Key, e.clock.Now()); deferred {
		// Held by its gate, as the host does: the execution is not even loaded.
		e.deferTask(st, until)
		e.mu.Lock()
		e.gated++
		e.mu.Unlock()
		return
	}
	s, exec, err := e.lockExecution(st.Ref)
	if err != nil {
		// The execution is gone; so is the point of its tasks.
		e.countPruned()
		return
	}
	defer s.mu.Unlock()
	m, err := exec.ExecutePureTask(e.clock.Now(), st.Task)
	switch {
	case errors.Is(err, chasm.ErrTaskNotValid):
		e.countPruned()
	case errors.Is(err, chasm.ErrPureTaskStillValid):
		e.t.Errorf("chasmtest: %v: a pure task must make its own validator false", err)
	case isDeferred(err):
		until, _ := chasm.AsDeferred(err)
		e.deferTask(st, until)
	case err != nil:
		e.t.Errorf("chasmtest: pure task %s failed: %v", st, err)
	default:
		e.commit(exec, m)
		e.mu.Lock()
		e.executed++
		e.mu.Unlock()
	}
}

// deferTask puts a pure task back, to be offered again at until.
func (e *Engine) deferTask(st *ScheduledTask, until time.Time) {
	e.t.Helper()
	if !until.After(e.clock.Now()) {
		e.t.Errorf("chasmtest: pure task %s deferred to %v, not after now (%v)", st, until, e.clock.Now())
		return
	}
	st.deferredUntil = until
	e.mu.Lock()
	e.pending = append(e.pending, st)
	e.deferred++
	e.mu.Unlock()
}

func (e *Engine) validate(st *ScheduledTask) (bool, error) {
	s, exec, err := e.lockExecution(st.Ref)
	if err != nil {
		return false, nil
	}
	defer s.mu.Unlock()
	return exec.ValidateTask(e.clock.Now(), st.Task)
}

func (e *Engine) remove(st *ScheduledTask, pruned bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending = slices.DeleteFunc(e.pending, func(other *ScheduledTask) bool { return other == st })
	if pruned {
		e.pruned++
	}
}

// ExecutedPureTasks returns how many pure tasks have run and committed (stale ones, which are
// pruned, do not count).
func (e *Engine) ExecutedPureTasks() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.executed
}

func (e *Engine) countPruned() {
	e.mu.Lock()
	e.pruned++
	e.mu.Unlock()
}

func isDeferred(err error) bool {
	_, ok := chasm.AsDeferred(err)
	return ok
}

// GatedPureTasks returns how many of the deferrals (DeferredPureTasks) were made by a task
// type's gate (chasm.WithGate), without the execution being loaded.
func (e *Engine) GatedPureTasks() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gated
}

// DeferredPureTasks returns how many times a pure task was deferred (chasm.DeferTask, or its
// gate).
func (e *Engine) DeferredPureTasks() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.deferred
}
