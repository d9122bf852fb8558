package chasm

import (
	"fmt"
	"slices"

	"go.temporal.io/api/serviceerror"
)

// StateMachine is a component (or part of one) whose behaviour is driven by Transitions over
// states of type S.
type StateMachine[S comparable] interface {
	StateMachineState() S
	SetStateMachineState(S)
}

// Transition moves a state machine from one of Sources to Destination in response to an event
// of type E. Declare transitions as package variables named for what happens
// (TransitionLeaseExpired), so the whole lifecycle reads in one file.
type Transition[S comparable, SM StateMachine[S], E any] struct {
	Sources     []S
	Destination S
	apply       func(SM, MutableContext, E) error
}

// NewTransition declares a transition. apply runs with the machine still in its source state
// (so it can tell which source it came from) and the destination is set only if apply succeeds.
func NewTransition[S comparable, SM StateMachine[S], E any](
	sources []S, destination S, apply func(SM, MutableContext, E) error,
) Transition[S, SM, E] {
	return Transition[S, SM, E]{Sources: sources, Destination: destination, apply: apply}
}

// Possible reports whether the transition may be applied in the machine's current state.
func (t Transition[S, SM, E]) Possible(sm SM) bool {
	return slices.Contains(t.Sources, sm.StateMachineState())
}

// Apply performs the transition. From a state that is not a source it returns a
// FailedPrecondition error and changes nothing. An error from apply must fail the surrounding
// transaction, which then leaves no trace.
func (t Transition[S, SM, E]) Apply(sm SM, ctx MutableContext, event E) error {
	from := sm.StateMachineState()
	if !t.Possible(sm) {
		return serviceerror.NewFailedPrecondition(
			fmt.Sprintf("invalid transition from %v to %v", from, t.Destination))
	}
	if t.apply != nil {
		if err := t.apply(sm, ctx, event); err != nil {
			return err
		}
	}
	sm.SetStateMachineState(t.Destination)
	return nil
}
