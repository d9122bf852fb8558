package chasm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	workerpb "go.temporal.io/api/worker/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/vigilhq/vigil/chasm"
	testpb "github.com/vigilhq/vigil/chasm/chasmtest/gen/testpb/v1"
)

// Minimal components for registry tests; behaviour is tested with the Reminder component in
// chasmtest.

type stringComponent struct{ state *wrapperspb.StringValue }

func (c *stringComponent) State() proto.Message                 { return c.state }
func (c *stringComponent) LifecycleState() chasm.LifecycleState { return chasm.LifecycleRunning }

type bytesComponent struct{ state *wrapperspb.BytesValue }

func (c *bytesComponent) State() proto.Message                 { return c.state }
func (c *bytesComponent) LifecycleState() chasm.LifecycleState { return chasm.LifecycleRunning }

type nopPure[T proto.Message] struct{}

func (nopPure[T]) Validate(chasm.Context, *stringComponent, chasm.TaskAttributes, T) (bool, error) {
	return false, nil
}
func (nopPure[T]) Execute(chasm.MutableContext, *stringComponent, chasm.TaskAttributes, T) error {
	return nil
}

type nopSideEffect[T proto.Message] struct{}

func (nopSideEffect[T]) Validate(chasm.Context, *stringComponent, chasm.TaskAttributes, T) (bool, error) {
	return false, nil
}
func (nopSideEffect[T]) Execute(context.Context, chasm.ComponentRef, chasm.TaskAttributes, T) error {
	return nil
}

type testLibrary struct {
	name       string
	components []*chasm.RegistrableComponent
	tasks      []*chasm.RegistrableTask
}

func (l *testLibrary) Name() string                              { return l.name }
func (l *testLibrary) Components() []*chasm.RegistrableComponent { return l.components }
func (l *testLibrary) Tasks() []*chasm.RegistrableTask           { return l.tasks }

func stringComponentReg(name string) *chasm.RegistrableComponent {
	return chasm.NewRegistrableComponent(name, func(s *wrapperspb.StringValue) *stringComponent {
		return &stringComponent{state: s}
	})
}

func bytesComponentReg(name string) *chasm.RegistrableComponent {
	return chasm.NewRegistrableComponent(name, func(s *wrapperspb.BytesValue) *bytesComponent {
		return &bytesComponent{state: s}
	})
}

func TestRegistry(t *testing.T) {
	t.Parallel()

	t.Run("QualifiesNamesAndDerivesStableIDs", func(t *testing.T) {
		lib := &testLibrary{
			name:       "demo",
			components: []*chasm.RegistrableComponent{stringComponentReg("thing")},
			tasks:      []*chasm.RegistrableTask{chasm.NewRegistrablePureTask("tick", nopPure[*emptypb.Empty]{})},
		}
		r := chasm.NewRegistry()
		require.NoError(t, r.Register(lib))

		c, ok := r.Component("demo.thing")
		require.True(t, ok)
		require.Equal(t, "demo.thing", c.FullName())
		byID, ok := r.ComponentByID(c.ID())
		require.True(t, ok)
		require.Same(t, c, byID)

		task, ok := r.Task("demo.tick")
		require.True(t, ok)
		byPayload, ok := r.TaskForPayload(&emptypb.Empty{})
		require.True(t, ok)
		require.Same(t, task, byPayload)

		archetype, err := chasm.ArchetypeOf[*stringComponent](r)
		require.NoError(t, err)
		require.Equal(t, "demo.thing", archetype)

		// The same name yields the same ID in another registry: IDs are persisted.
		other := chasm.NewRegistry()
		require.NoError(t, other.Register(&testLibrary{
			name:       "demo",
			components: []*chasm.RegistrableComponent{stringComponentReg("thing")},
		}))
		again, _ := other.Component("demo.thing")
		require.Equal(t, c.ID(), again.ID())
	})

	cases := []struct {
		name    string
		libs    func() []*testLibrary
		wantErr string
	}{
		{
			name: "DuplicateLibrary",
			libs: func() []*testLibrary {
				return []*testLibrary{{name: "a"}, {name: "a"}}
			},
			wantErr: `library "a" is already registered`,
		},
		{
			name:    "InvalidLibraryName",
			libs:    func() []*testLibrary { return []*testLibrary{{name: "has.dot"}} },
			wantErr: "invalid library name",
		},
		{
			name: "DuplicateComponentName",
			libs: func() []*testLibrary {
				return []*testLibrary{{name: "a", components: []*chasm.RegistrableComponent{
					stringComponentReg("x"), bytesComponentReg("x"),
				}}}
			},
			wantErr: "component a.x is registered twice",
		},
		{
			name: "SameGoTypeTwice",
			libs: func() []*testLibrary {
				return []*testLibrary{{name: "a", components: []*chasm.RegistrableComponent{
					stringComponentReg("x"), stringComponentReg("y"),
				}}}
			},
			wantErr: "is already registered as a.x",
		},
		{
			name: "ComponentIDCollision",
			libs: func() []*testLibrary {
				// fnv-32a("lib.c27088") == fnv-32a("lib.c190740").
				return []*testLibrary{{name: "lib", components: []*chasm.RegistrableComponent{
					stringComponentReg("c27088"), bytesComponentReg("c190740"),
				}}}
			},
			wantErr: "collides with lib.c27088",
		},
		{
			name: "PayloadTypeUsedTwice",
			libs: func() []*testLibrary {
				return []*testLibrary{{
					name:       "a",
					components: []*chasm.RegistrableComponent{stringComponentReg("x")},
					tasks: []*chasm.RegistrableTask{
						chasm.NewRegistrablePureTask("one", nopPure[*emptypb.Empty]{}),
						chasm.NewRegistrablePureTask("two", nopPure[*emptypb.Empty]{}),
					},
				}}
			},
			wantErr: "is already used by a.one",
		},
		{
			name: "TaskOfUnregisteredComponent",
			libs: func() []*testLibrary {
				return []*testLibrary{{
					name:  "a",
					tasks: []*chasm.RegistrableTask{chasm.NewRegistrablePureTask("one", nopPure[*emptypb.Empty]{})},
				}}
			},
			wantErr: "which is not a registered component",
		},
		{
			name: "InvalidCollectionName",
			libs: func() []*testLibrary {
				return []*testLibrary{{name: "a", components: []*chasm.RegistrableComponent{
					chasm.NewRegistrableComponent("x", func(s *wrapperspb.StringValue) *stringComponent {
						return &stringComponent{state: s}
					}, chasm.WithCollections("#packed")),
				}}}
			},
			wantErr: `invalid collection name "#packed"`,
		},
		{
			name: "SideEffectSingletonRefused",
			libs: func() []*testLibrary {
				return []*testLibrary{{
					name:       "a",
					components: []*chasm.RegistrableComponent{stringComponentReg("x")},
					tasks: []*chasm.RegistrableTask{chasm.NewRegistrableSideEffectTask(
						"send", nopSideEffect[*emptypb.Empty]{}, chasm.WithSingletonTimer())},
				}}
			},
			wantErr: "only pure tasks can be singleton timers",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := chasm.NewRegistry()
			libs := tc.libs()
			var err error
			for _, lib := range libs {
				if err = r.Register(lib); err != nil {
					break
				}
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}

	t.Run("FailedRegisterLeavesRegistryUnchanged", func(t *testing.T) {
		r := chasm.NewRegistry()
		bad := &testLibrary{
			name:       "a",
			components: []*chasm.RegistrableComponent{stringComponentReg("x")},
			tasks:      []*chasm.RegistrableTask{chasm.NewRegistrablePureTask("bad name", nopPure[*emptypb.Empty]{})},
		}
		require.Error(t, r.Register(bad))
		_, ok := r.Component("a.x")
		require.False(t, ok)

		good := &testLibrary{name: "a", components: []*chasm.RegistrableComponent{stringComponentReg("x")}}
		require.NoError(t, r.Register(good))
	})
}

type reminderComponent struct{ state *testpb.ReminderState }

func (c *reminderComponent) State() proto.Message                 { return c.state }
func (c *reminderComponent) LifecycleState() chasm.LifecycleState { return chasm.LifecycleRunning }

// TestAFailedTransactionLeavesTheCommittedState checks that a transaction works on a deep copy:
// what a failed one edited in place, nested messages included, is not seen afterwards.
func TestAFailedTransactionLeavesTheCommittedState(t *testing.T) {
	t.Parallel()
	registry := chasm.NewRegistry()
	reg := chasm.NewRegistrableComponent("reminder", func(s *testpb.ReminderState) *reminderComponent {
		return &reminderComponent{state: s}
	})
	require.NoError(t, registry.Register(&testLibrary{name: "lib", components: []*chasm.RegistrableComponent{reg}}))
	rc, ok := registry.Component("lib.reminder")
	require.True(t, ok)
	exec := chasm.NewExecution(registry, rc, chasm.ExecutionKey{NamespaceID: "ns", BusinessID: "b", RunID: "run"})
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	m, err := exec.Start(now, func(chasm.MutableContext) (chasm.Component, error) {
		return &reminderComponent{state: &testpb.ReminderState{
			Deadline:      timestamppb.New(now),
			LastHeartbeat: &workerpb.WorkerHeartbeat{WorkerInstanceKey: "first"},
		}}, nil
	}, nil)
	require.NoError(t, err)
	exec.Apply(m)

	_, err = exec.Update(now, func(_ chasm.MutableContext, c chasm.Component) error {
		s := c.(*reminderComponent).state
		s.Deadline.Seconds += 3600
		s.LastHeartbeat.WorkerInstanceKey = "edited"
		s.FireCount = 7
		return errors.New("rolled back")
	})
	require.Error(t, err)
	require.NoError(t, exec.Read(now, func(_ chasm.Context, c chasm.Component) error {
		s := c.(*reminderComponent).state
		require.Equal(t, now, s.Deadline.AsTime())
		require.Equal(t, "first", s.LastHeartbeat.WorkerInstanceKey)
		require.Zero(t, s.FireCount)
		return nil
	}))
}
