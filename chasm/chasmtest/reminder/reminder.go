// Package reminder is a small component used to test the chasm framework and the engines
// that run it. It exercises everything a real library uses: a state machine, a singleton pure
// timer, a side-effect task that calls out and re-enters the engine, and a collection.
//
//	SCHEDULED ──FireTask (at deadline)──► FIRED ──NotifyTask (to destination)──► NOTIFIED
//	    ▲                                   │                                     │
//	    └──────────── Reschedule ───────────┴─────────────────────────────────────┘
//	SCHEDULED ──Cancel──► CANCELED (closed)
package reminder

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	testpb "github.com/vigilhq/vigil/chasm/chasmtest/gen/testpb/v1"
)

// LibraryName qualifies the reminder's component and tasks.
const LibraryName = "reminder"

// Archetype is the full name of the Reminder component.
const Archetype = LibraryName + ".reminder"

// Notes is the reminder's collection of notes, keyed by note ID.
var Notes = chasm.NewCollection[*testpb.Note]("notes")

// Reminder is the component.
type Reminder struct {
	*testpb.ReminderState
}

// State implements chasm.Component.
func (r *Reminder) State() proto.Message { return r.ReminderState }

// LifecycleState implements chasm.Component.
func (r *Reminder) LifecycleState() chasm.LifecycleState {
	if r.Status == testpb.ReminderStatus_REMINDER_STATUS_CANCELED {
		return chasm.LifecycleCompleted
	}
	return chasm.LifecycleRunning
}

// IndexedFields implements chasm.IndexedComponent.
func (r *Reminder) IndexedFields() chasm.IndexedFields {
	return chasm.IndexedFields{Status: r.Status.String(), TaskQueue: r.Destination}
}

// StateMachineState implements chasm.StateMachine.
func (r *Reminder) StateMachineState() testpb.ReminderStatus { return r.Status }

// SetStateMachineState implements chasm.StateMachine.
func (r *Reminder) SetStateMachineState(s testpb.ReminderStatus) { r.Status = s }

// New returns a reminder that fires after delay and then notifies destination ("" = nobody).
func New(ctx chasm.MutableContext, delay time.Duration, destination string) (*Reminder, error) {
	r := &Reminder{ReminderState: &testpb.ReminderState{Destination: destination}}
	return r, TransitionScheduled.Apply(r, ctx, EventSchedule{Delay: delay})
}

// EventSchedule (re)arms the reminder.
type EventSchedule struct{ Delay time.Duration }

// EventFired is the deadline passing.
type EventFired struct{}

// EventNotified is the destination acknowledging a firing.
type EventNotified struct{ FireCount int64 }

var (
	status = func(s ...testpb.ReminderStatus) []testpb.ReminderStatus { return s }

	// TransitionScheduled arms the reminder, replacing any pending firing.
	TransitionScheduled = chasm.NewTransition(
		status(testpb.ReminderStatus_REMINDER_STATUS_UNSPECIFIED, testpb.ReminderStatus_REMINDER_STATUS_SCHEDULED,
			testpb.ReminderStatus_REMINDER_STATUS_FIRED, testpb.ReminderStatus_REMINDER_STATUS_NOTIFIED),
		testpb.ReminderStatus_REMINDER_STATUS_SCHEDULED,
		func(r *Reminder, ctx chasm.MutableContext, ev EventSchedule) error {
			deadline := ctx.Now().Add(ev.Delay)
			r.Deadline = timestamppb.New(deadline)
			ctx.AddTask(chasm.TaskAttributes{ScheduledTime: deadline}, &testpb.FireTask{})
			return nil
		})

	// TransitionFired records a firing and, with a destination, sends a notification.
	TransitionFired = chasm.NewTransition(
		status(testpb.ReminderStatus_REMINDER_STATUS_SCHEDULED),
		testpb.ReminderStatus_REMINDER_STATUS_FIRED,
		func(r *Reminder, ctx chasm.MutableContext, _ EventFired) error {
			r.FireCount++
			if r.Destination != "" {
				ctx.AddTask(chasm.TaskAttributes{Destination: r.Destination}, &testpb.NotifyTask{FireCount: r.FireCount})
			}
			return nil
		})

	// TransitionNotified records the destination's acknowledgement.
	TransitionNotified = chasm.NewTransition(
		status(testpb.ReminderStatus_REMINDER_STATUS_FIRED),
		testpb.ReminderStatus_REMINDER_STATUS_NOTIFIED,
		func(r *Reminder, _ chasm.MutableContext, ev EventNotified) error {
			if ev.FireCount != r.FireCount {
				return errStaleNotification
			}
			r.NotifyCount++
			return nil
		})

	// TransitionCanceled closes the reminder before it fires.
	TransitionCanceled = chasm.NewTransition(
		status(testpb.ReminderStatus_REMINDER_STATUS_SCHEDULED),
		testpb.ReminderStatus_REMINDER_STATUS_CANCELED,
		func(r *Reminder, _ chasm.MutableContext, _ struct{}) error {
			r.Deadline = nil
			return nil
		})
)

var errStaleNotification = errors.New("reminder: notification for an earlier firing")

// AddNote stores a note in the reminder's collection and counts it in the state.
func (r *Reminder) AddNote(ctx chasm.MutableContext, id, text string) {
	if !Notes.Has(ctx, id) {
		r.NotesCount++
	}
	Notes.Put(ctx, id, &testpb.Note{Text: text})
}

// RemoveNote deletes a note.
func (r *Reminder) RemoveNote(ctx chasm.MutableContext, id string) {
	if Notes.Has(ctx, id) {
		r.NotesCount--
	}
	Notes.Delete(ctx, id)
}

// FireTaskHandler fires the reminder at its deadline.
type FireTaskHandler struct{}

// Validate holds only for the timer of the current deadline: a rescheduled reminder's older
// timer, or one that already fired, is stale.
func (FireTaskHandler) Validate(_ chasm.Context, r *Reminder, attrs chasm.TaskAttributes, _ *testpb.FireTask) (bool, error) {
	return r.Status == testpb.ReminderStatus_REMINDER_STATUS_SCHEDULED &&
		r.Deadline != nil && r.Deadline.AsTime().Equal(attrs.ScheduledTime), nil
}

// Execute fires the reminder.
func (FireTaskHandler) Execute(ctx chasm.MutableContext, r *Reminder, _ chasm.TaskAttributes, _ *testpb.FireTask) error {
	return TransitionFired.Apply(r, ctx, EventFired{})
}

// Sink receives notifications; tests decide whether it fails.
type Sink interface {
	Deliver(ctx context.Context, destination, reminderID string, fireCount int64) error
}

// NotifyTaskHandler delivers a firing to the destination, then records it.
type NotifyTaskHandler struct {
	Sink Sink
}

// Validate holds while the firing it carries has not been acknowledged.
func (NotifyTaskHandler) Validate(_ chasm.Context, r *Reminder, _ chasm.TaskAttributes, task *testpb.NotifyTask) (bool, error) {
	return r.Status == testpb.ReminderStatus_REMINDER_STATUS_FIRED && r.FireCount == task.FireCount, nil
}

// Execute calls the sink outside the execution lock, then re-enters the engine.
func (h NotifyTaskHandler) Execute(ctx context.Context, ref chasm.ComponentRef, attrs chasm.TaskAttributes, task *testpb.NotifyTask) error {
	if err := h.Sink.Deliver(ctx, attrs.Destination, ref.Key.BusinessID, task.FireCount); err != nil {
		return err
	}
	engine := chasm.EngineFromContext(ctx)
	_, err := chasm.UpdateComponent(ctx, engine, ref, func(mctx chasm.MutableContext, r *Reminder) (struct{}, error) {
		if !TransitionNotified.Possible(r) || r.FireCount != task.FireCount {
			// Rescheduled or acknowledged meanwhile: nothing left to record.
			return struct{}{}, nil
		}
		return struct{}{}, TransitionNotified.Apply(r, mctx, EventNotified{FireCount: task.FireCount})
	})
	return err
}

// Library registers the reminder.
type Library struct {
	sink Sink
}

// NewLibrary returns the reminder library delivering notifications to sink.
func NewLibrary(sink Sink) *Library { return &Library{sink: sink} }

// Name implements chasm.Library.
func (l *Library) Name() string { return LibraryName }

// Components implements chasm.Library.
func (l *Library) Components() []*chasm.RegistrableComponent {
	return []*chasm.RegistrableComponent{
		chasm.NewRegistrableComponent("reminder",
			func(s *testpb.ReminderState) *Reminder { return &Reminder{ReminderState: s} },
			chasm.WithCollections(Notes.Name())),
	}
}

// Tasks implements chasm.Library.
func (l *Library) Tasks() []*chasm.RegistrableTask {
	return []*chasm.RegistrableTask{
		chasm.NewRegistrablePureTask("fire", FireTaskHandler{}, chasm.WithSingletonTimer()),
		chasm.NewRegistrableSideEffectTask("notify", NotifyTaskHandler{Sink: l.sink}),
	}
}

// RecordingSink is a Sink for tests that records deliveries and can be told to fail.
type RecordingSink struct {
	mu        sync.Mutex
	delivered []Delivery
	failWith  error
}

// Delivery is one recorded notification.
type Delivery struct {
	Destination string
	ReminderID  string
	FireCount   int64
}

// NewRecordingSink returns an empty RecordingSink.
func NewRecordingSink() *RecordingSink {
	return &RecordingSink{}
}

// Deliver implements Sink.
func (s *RecordingSink) Deliver(_ context.Context, destination, reminderID string, fireCount int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failWith != nil {
		return s.failWith
	}
	s.delivered = append(s.delivered, Delivery{Destination: destination, ReminderID: reminderID, FireCount: fireCount})
	return nil
}

// FailWith makes every later Deliver return err (nil restores success).
func (s *RecordingSink) FailWith(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = err
}

// Delivered returns a copy of the deliveries so far.
func (s *RecordingSink) Delivered() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.delivered...)
}
