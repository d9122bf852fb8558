package chasm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"google.golang.org/protobuf/proto"
)

// TaskAttributes decide where a task goes. ScheduledTime and Destination are exclusive:
// ScheduledTime puts the task on the timer queue, Destination on the outbound queue, and
// neither means "as soon as possible" (a timer due at the transaction's Now).
type TaskAttributes struct {
	ScheduledTime time.Time
	Destination   string
}

// IsTimer reports whether the task waits for a time rather than a destination.
func (a TaskAttributes) IsTimer() bool { return a.Destination == "" }

func (a TaskAttributes) validate() error {
	if !a.ScheduledTime.IsZero() && a.Destination != "" {
		return errors.New("task attributes set both ScheduledTime and Destination")
	}
	return nil
}

// PureTaskHandler validates and runs a pure task. Execute runs under the execution lock and
// must not do I/O. After Execute, Validate must return false for the same task: that is how a
// task that already ran is recognised when it is loaded again.
type PureTaskHandler[C Component, T proto.Message] interface {
	Validate(ctx Context, c C, attrs TaskAttributes, task T) (bool, error)
	Execute(ctx MutableContext, c C, attrs TaskAttributes, task T) error
}

// SideEffectTaskHandler validates and runs a side-effect task. Validate runs under the
// execution lock; Execute runs outside it, may do I/O, and re-enters the engine through ref.
// Once Execute has succeeded Validate must return false, so that a task delivered twice (for
// example after a crash between execution and acknowledgement) is recognised and dropped.
type SideEffectTaskHandler[C Component, T proto.Message] interface {
	Validate(ctx Context, c C, attrs TaskAttributes, task T) (bool, error)
	Execute(ctx context.Context, ref ComponentRef, attrs TaskAttributes, task T) error
}

// TaskOption configures a task registration.
type TaskOption func(*RegistrableTask)

// WithSingletonTimer makes the task a singleton timer: an execution has at most one pending
// task of this type, and adding a new one replaces the pending one in place. A lease expiry
// timer renewed by every heartbeat is the example: without it every heartbeat would leave one
// more stale timer behind.
func WithSingletonTimer() TaskOption {
	return func(t *RegistrableTask) { t.singleton = true }
}

// WithRestartGrace marks the task as one that must not fire until a grace period has passed
// after its shard was (re)acquired, so that a server outage is not mistaken for the failure of
// what the task watches. The length of the grace is the host's configuration.
func WithRestartGrace() TaskOption {
	return func(t *RegistrableTask) { t.restartGrace = true }
}

// WithGate makes the host ask gate, before it loads the task's execution (key), whether the
// task may run at all now: while gate answers deferred, the task is offered again at until without its
// execution being read, decoded or locked. For tasks that a host-wide condition holds back in
// bulk (lease expiries while the expiry brake is on): each would otherwise cost a load and a
// decline at every recheck, on a host that is already behind. A gate reads only the host's
// memory; the task's own executor still decides once the gate lets it through.
func WithGate(gate func(key ExecutionKey, now time.Time) (until time.Time, deferred bool)) TaskOption {
	return func(t *RegistrableTask) { t.gate = gate }
}

// WithYieldToCalls marks a side-effect task as background work that may wait while the host
// is behind on its calls (the host decides how long): handing a stopped worker's activities
// back can wait for the restart's own calls, an activity's dispatch cannot.
func WithYieldToCalls() TaskOption {
	return func(t *RegistrableTask) { t.yieldToCalls = true }
}

// RegistrableTask is a task type as registered by a library.
type RegistrableTask struct {
	name          string
	fullName      string
	id            uint32
	componentType reflect.Type
	payloadType   reflect.Type
	newPayload    func() proto.Message
	pure          bool
	singleton     bool
	restartGrace  bool
	yieldToCalls  bool
	gate          func(key ExecutionKey, now time.Time) (until time.Time, deferred bool)

	validate          func(Context, Component, TaskAttributes, proto.Message) (bool, error)
	executePure       func(MutableContext, Component, TaskAttributes, proto.Message) error
	executeSideEffect func(context.Context, ComponentRef, TaskAttributes, proto.Message) error
}

// NewRegistrablePureTask declares a pure task type named name (unique within its library),
// with payload T, that runs against components of type C.
func NewRegistrablePureTask[C Component, T proto.Message](
	name string, handler PureTaskHandler[C, T], opts ...TaskOption,
) *RegistrableTask {
	t := newRegistrableTask[C, T](name, opts)
	t.pure = true
	t.validate = func(ctx Context, c Component, attrs TaskAttributes, payload proto.Message) (bool, error) {
		return handler.Validate(ctx, c.(C), attrs, payload.(T))
	}
	t.executePure = func(ctx MutableContext, c Component, attrs TaskAttributes, payload proto.Message) error {
		return handler.Execute(ctx, c.(C), attrs, payload.(T))
	}
	return t
}

// NewRegistrableSideEffectTask declares a side-effect task type named name (unique within its
// library), with payload T, that belongs to components of type C.
func NewRegistrableSideEffectTask[C Component, T proto.Message](
	name string, handler SideEffectTaskHandler[C, T], opts ...TaskOption,
) *RegistrableTask {
	t := newRegistrableTask[C, T](name, opts)
	t.validate = func(ctx Context, c Component, attrs TaskAttributes, payload proto.Message) (bool, error) {
		return handler.Validate(ctx, c.(C), attrs, payload.(T))
	}
	t.executeSideEffect = func(ctx context.Context, ref ComponentRef, attrs TaskAttributes, payload proto.Message) error {
		return handler.Execute(ctx, ref, attrs, payload.(T))
	}
	return t
}

func newRegistrableTask[C Component, T proto.Message](name string, opts []TaskOption) *RegistrableTask {
	var zero T
	msgType := zero.ProtoReflect().Type()
	t := &RegistrableTask{
		name:          name,
		componentType: reflect.TypeFor[C](),
		payloadType:   reflect.TypeFor[T](),
		newPayload:    func() proto.Message { return msgType.New().Interface() },
	}
	for _, opt := range opts {
		opt(t)
	}
	return t
}

// Name returns the library-local name.
func (t *RegistrableTask) Name() string { return t.name }

// FullName returns the library-qualified name ("library.task"); set at registration.
func (t *RegistrableTask) FullName() string { return t.fullName }

// ID returns the stable numeric ID derived from FullName; set at registration. Engines
// persist it instead of the name.
func (t *RegistrableTask) ID() uint32 { return t.id }

// IsPure reports whether the task runs under the execution lock without I/O.
func (t *RegistrableTask) IsPure() bool { return t.pure }

// IsSingletonTimer reports whether at most one task of this type is pending per execution.
func (t *RegistrableTask) IsSingletonTimer() bool { return t.singleton }

// HasRestartGrace reports whether the task waits out a grace period after a shard is acquired.
func (t *RegistrableTask) HasRestartGrace() bool { return t.restartGrace }

// Gate reports whether the task must wait, without its execution (WithGate); a task without
// a gate never does.
func (t *RegistrableTask) Gate(key ExecutionKey, now time.Time) (until time.Time, deferred bool) {
	if t.gate == nil {
		return time.Time{}, false
	}
	return t.gate(key, now)
}

// YieldsToCalls says whether the task may wait while the host is behind on its calls
// (WithYieldToCalls).
func (t *RegistrableTask) YieldsToCalls() bool { return t.yieldToCalls }

// UnmarshalPayload decodes a persisted payload of this task type.
func (t *RegistrableTask) UnmarshalPayload(data []byte) (proto.Message, error) {
	m := t.newPayload()
	if err := proto.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("decode %s task payload: %w", t.fullName, err)
	}
	return m, nil
}

// ExecuteSideEffect runs a side-effect task. Engines call it outside the execution lock, after
// the task validated.
func (t *RegistrableTask) ExecuteSideEffect(ctx context.Context, ref ComponentRef, task *Task) error {
	if t.pure {
		return fmt.Errorf("task %s is pure and cannot run as a side effect", t.fullName)
	}
	return t.executeSideEffect(ctx, ref, task.Attributes, task.Payload)
}

// Task is one task instance: its type, attributes and payload. Engines add their own
// bookkeeping (task IDs, the owning execution) around it.
type Task struct {
	Type       *RegistrableTask
	Attributes TaskAttributes
	Payload    proto.Message
}

// MarshalPayload encodes the payload deterministically.
func (t *Task) MarshalPayload() ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(t.Payload)
}
