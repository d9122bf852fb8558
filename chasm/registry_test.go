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

type sharedComponent struct{ state *testpb.ReminderState }

func (c *sharedComponent) State() proto.Message                 { return c.state }
func (c *sharedComponent) LifecycleState() chasm.LifecycleState { return chasm.LifecycleRunning }

func sharedComponentReg(fields ...string) *chasm.RegistrableComponent {
	return chasm.NewRegistrableComponent("shared", func(s *testpb.ReminderState) *sharedComponent {
		return &sharedComponent{state: s}
	}, chasm.WithSharedStateFields(fields...))
}

func TestSharedStateFields(t *testing.T) {
	t.Parallel()

	t.Run("RegisterRefusesAFieldThatCannotBeShared", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{"no_such_field", "fire_count"} {
			err := chasm.NewRegistry().Register(&testLibrary{name: "lib", components: []*chasm.RegistrableComponent{sharedComponentReg(name)}})
			require.ErrorContains(t, err, name)
		}
	})

	t.Run("ATransactionSharesTheFieldAndCopiesTheRest", func(t *testing.T) {
		t.Parallel()
		registry := chasm.NewRegistry()
		require.NoError(t, registry.Register(&testLibrary{name: "lib", components: []*chasm.RegistrableComponent{sharedComponentReg("last_heartbeat")}}))
		rc, ok := registry.Component("lib.shared")
		require.True(t, ok)
		exec := chasm.NewExecution(registry, rc, chasm.ExecutionKey{NamespaceID: "ns", BusinessID: "b", RunID: "run"})
		now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		m, err := exec.Start(now, func(chasm.MutableContext) (chasm.Component, error) {
			return &sharedComponent{state: &testpb.ReminderState{
				Deadline:      timestamppb.New(now),
				LastHeartbeat: &workerpb.WorkerHeartbeat{WorkerInstanceKey: "first"},
			}}, nil
		}, nil)
		require.NoError(t, err)
		exec.Apply(m)
		var committed *testpb.ReminderState
		require.NoError(t, exec.Read(now, func(_ chasm.Context, c chasm.Component) error {
			committed = c.(*sharedComponent).state
			return nil
		}))

		// A failed transaction that edits a copied field in place leaves the committed state
		// alone; the shared field is the committed one, not a copy.
		_, err = exec.Update(now, func(_ chasm.MutableContext, c chasm.Component) error {
			s := c.(*sharedComponent).state
			require.NotSame(t, committed, s)
			require.Same(t, committed.LastHeartbeat, s.LastHeartbeat)
			require.NotSame(t, committed.Deadline, s.Deadline)
			s.Deadline.Seconds += 3600
			s.FireCount = 7
			return errors.New("rolled back")
		})
		require.Error(t, err)
		require.Equal(t, now, committed.Deadline.AsTime())
		require.Zero(t, committed.FireCount)

		// Replacing the shared field is how a transaction changes it.
		m, err = exec.Update(now, func(_ chasm.MutableContext, c chasm.Component) error {
			c.(*sharedComponent).state.LastHeartbeat = &workerpb.WorkerHeartbeat{WorkerInstanceKey: "second"}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, "first", committed.LastHeartbeat.WorkerInstanceKey)
		var stored testpb.ReminderState
		require.NoError(t, proto.Unmarshal(m.State, &stored))
		require.Equal(t, "second", stored.LastHeartbeat.WorkerInstanceKey)
		require.Equal(t, now, stored.Deadline.AsTime())
	})
}
