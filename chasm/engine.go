package chasm

import (
	"context"
	"fmt"

	"go.temporal.io/api/serviceerror"
)

// Engine runs transactions on executions. The durable implementation lives in history; an
// in-memory one in chasmtest. Library code uses the typed helpers below rather than these
// methods, so it needs no type assertions.
type Engine interface {
	// Registry returns the registry the engine was built with.
	Registry() *Registry

	// StartExecution creates a new run of ref.Key.BusinessID (ref.Key.RunID is ignored).
	StartExecution(ctx context.Context, ref ComponentRef, newFn func(MutableContext) (Component, error), opts StartOptions) (StartResult, error)

	// UpdateWithStart atomically updates the current run of the business ID or, if there is
	// none, creates one with newFn and then updates it in the same transaction. Two concurrent
	// calls for a new business ID never both create. The current run is updated whatever its
	// lifecycle: the update decides what a closed execution accepts.
	UpdateWithStart(ctx context.Context, ref ComponentRef, newFn func(MutableContext) (Component, error), updateFn func(MutableContext, Component) error) (StartResult, error)

	// UpdateComponent runs updateFn as one transaction. An error from updateFn leaves no trace.
	UpdateComponent(ctx context.Context, ref ComponentRef, updateFn func(MutableContext, Component) error) error

	// ReadComponent runs readFn against the committed state.
	ReadComponent(ctx context.Context, ref ComponentRef, readFn func(Context, Component) error) error

	// PollComponent blocks until predicate holds for the committed state, then returns nil, or
	// until ctx ends, then returns ctx's error. The predicate runs after every committed change.
	PollComponent(ctx context.Context, ref ComponentRef, predicate func(Context, Component) (bool, error)) error
}

// IDReusePolicy says whether a business ID whose current run is closed may start again.
type IDReusePolicy int

const (
	// IDReuseAllowDuplicate starts a new run after any closed one.
	IDReuseAllowDuplicate IDReusePolicy = iota
	// IDReuseAllowDuplicateFailedOnly starts a new run only after a failed one.
	IDReuseAllowDuplicateFailedOnly
	// IDReuseRejectDuplicate never reuses a business ID.
	IDReuseRejectDuplicate
)

// IDConflictPolicy says what to do when the business ID's current run is still running.
type IDConflictPolicy int

const (
	// IDConflictFail refuses the start with an ExecutionAlreadyStartedError.
	IDConflictFail IDConflictPolicy = iota
	// IDConflictUseExisting returns the running run instead of starting one.
	IDConflictUseExisting
)

// StartOptions control StartExecution when the business ID is taken.
type StartOptions struct {
	ReusePolicy    IDReusePolicy
	ConflictPolicy IDConflictPolicy
}

// StartResult tells which run a start or update-with-start landed on.
type StartResult struct {
	RunID   string
	Created bool
}

// ExecutionAlreadyStartedError refuses a start because the business ID is taken. It unwraps to
// a serviceerror.AlreadyExists so it crosses the wire with the right code.
type ExecutionAlreadyStartedError struct {
	Ref          ComponentRef
	CurrentRunID string
}

func (e *ExecutionAlreadyStartedError) Error() string {
	return fmt.Sprintf("%s %q already started (run %s)", e.Ref.Noun(), e.Ref.Key.BusinessID, e.CurrentRunID)
}

func (e *ExecutionAlreadyStartedError) Unwrap() error {
	return serviceerror.NewAlreadyExists(e.Error())
}

// NewExecutionNotFoundError is what engines return for a missing execution. Its message is
// public: it names the component the way the API does (worker "KEY", activity "ID"), not the
// internal archetype, namespace ID and key.
func NewExecutionNotFoundError(ref ComponentRef) error {
	msg := fmt.Sprintf("%s %q not found", ref.Noun(), ref.Key.BusinessID)
	if ref.Key.RunID != "" {
		msg = fmt.Sprintf("%s %q (run %s) not found", ref.Noun(), ref.Key.BusinessID, ref.Key.RunID)
	}
	return serviceerror.NewNotFound(msg)
}

// Typed helpers. They resolve the archetype from C and assert types once, here.

// NewRef returns a reference to the component of type C at key.
func NewRef[C Component](e Engine, key ExecutionKey) (ComponentRef, error) {
	archetype, err := ArchetypeOf[C](e.Registry())
	if err != nil {
		return ComponentRef{}, err
	}
	return ComponentRef{Archetype: archetype, Key: key}, nil
}

// StartExecution creates an execution rooted at a component of type C.
func StartExecution[C Component](
	ctx context.Context, e Engine, key ExecutionKey, newFn func(MutableContext) (C, error), opts StartOptions,
) (StartResult, error) {
	ref, err := NewRef[C](e, key)
	if err != nil {
		return StartResult{}, err
	}
	return e.StartExecution(ctx, ref, func(mctx MutableContext) (Component, error) {
		return newFn(mctx)
	}, opts)
}

// UpdateWithStart updates, or creates and updates, the execution rooted at C, returning
// updateFn's result.
func UpdateWithStart[C Component, R any](
	ctx context.Context, e Engine, key ExecutionKey,
	newFn func(MutableContext) (C, error), updateFn func(MutableContext, C) (R, error),
) (R, StartResult, error) {
	var result R
	ref, err := NewRef[C](e, key)
	if err != nil {
		return result, StartResult{}, err
	}
	start, err := e.UpdateWithStart(ctx, ref,
		func(mctx MutableContext) (Component, error) { return newFn(mctx) },
		func(mctx MutableContext, c Component) error {
			typed, err := assertComponent[C](c)
			if err != nil {
				return err
			}
			result, err = updateFn(mctx, typed)
			return err
		})
	if err != nil {
		var zero R
		return zero, StartResult{}, err
	}
	return result, start, nil
}

// UpdateComponent runs updateFn on the component of type C at ref, returning its result.
func UpdateComponent[C Component, R any](
	ctx context.Context, e Engine, ref ComponentRef, updateFn func(MutableContext, C) (R, error),
) (R, error) {
	var result R
	err := e.UpdateComponent(ctx, ref, func(mctx MutableContext, c Component) error {
		typed, err := assertComponent[C](c)
		if err != nil {
			return err
		}
		result, err = updateFn(mctx, typed)
		return err
	})
	if err != nil {
		var zero R
		return zero, err
	}
	return result, nil
}

// ReadComponent runs readFn on the component of type C at ref, returning its result.
func ReadComponent[C Component, R any](
	ctx context.Context, e Engine, ref ComponentRef, readFn func(Context, C) (R, error),
) (R, error) {
	var result R
	err := e.ReadComponent(ctx, ref, func(rctx Context, c Component) error {
		typed, err := assertComponent[C](c)
		if err != nil {
			return err
		}
		result, err = readFn(rctx, typed)
		return err
	})
	if err != nil {
		var zero R
		return zero, err
	}
	return result, nil
}

// PollComponent waits until fn reports done for the component of type C at ref and returns
// fn's result from that moment.
func PollComponent[C Component, R any](
	ctx context.Context, e Engine, ref ComponentRef, fn func(Context, C) (R, bool, error),
) (R, error) {
	var result R
	err := e.PollComponent(ctx, ref, func(rctx Context, c Component) (bool, error) {
		typed, err := assertComponent[C](c)
		if err != nil {
			return false, err
		}
		r, done, err := fn(rctx, typed)
		if done {
			result = r
		}
		return done, err
	})
	if err != nil {
		var zero R
		return zero, err
	}
	return result, nil
}

func assertComponent[C Component](c Component) (C, error) {
	typed, ok := c.(C)
	if !ok {
		var zero C
		return zero, serviceerror.NewInternal(fmt.Sprintf("component is %T, not %T", c, zero))
	}
	return typed, nil
}

// CheckStart applies StartOptions to the business ID's current run. It returns
// (existingRunID, nil) when the existing run should be used, ("", nil) when a new run may
// start, and an ExecutionAlreadyStartedError otherwise. Engines share it so the policies
// behave the same everywhere.
func CheckStart(ref ComponentRef, opts StartOptions, currentRunID string, current LifecycleState) (string, error) {
	if currentRunID == "" {
		return "", nil
	}
	if !current.IsClosed() {
		if opts.ConflictPolicy == IDConflictUseExisting {
			return currentRunID, nil
		}
		return "", &ExecutionAlreadyStartedError{Ref: ref, CurrentRunID: currentRunID}
	}
	switch opts.ReusePolicy {
	case IDReuseAllowDuplicate:
		return "", nil
	case IDReuseAllowDuplicateFailedOnly:
		if current == LifecycleFailed {
			return "", nil
		}
	}
	return "", &ExecutionAlreadyStartedError{Ref: ref, CurrentRunID: currentRunID}
}
