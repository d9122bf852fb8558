package chasm_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	workerv1 "go.temporal.io/api/worker/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/chasmtest"
	testpb "github.com/vigilhq/vigil/chasm/chasmtest/gen/testpb/v1"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
)

// cowLibrary registers the reminder's state as a copy-on-write component, with no tasks.
type cowLibrary struct{}

func (cowLibrary) Name() string { return "cow" }

func (cowLibrary) Components() []*chasm.RegistrableComponent {
	return []*chasm.RegistrableComponent{
		chasm.NewRegistrableComponent("reminder",
			func(s *testpb.ReminderState) *reminder.Reminder { return &reminder.Reminder{ReminderState: s} },
			chasm.WithCopyOnWrite(shallowReminder)),
	}
}

func (cowLibrary) Tasks() []*chasm.RegistrableTask { return nil }

func shallowReminder(s *testpb.ReminderState) *testpb.ReminderState {
	return &testpb.ReminderState{
		Status: s.Status, Deadline: s.Deadline, FireCount: s.FireCount, NotifyCount: s.NotifyCount,
		Destination: s.Destination, LastHeartbeat: s.LastHeartbeat, NotesCount: s.NotesCount,
	}
}

// errorsOf records what a check reports instead of failing the test.
type errorsOf struct {
	testing.TB
	errs []string
}

func (r *errorsOf) Helper() {}

func (r *errorsOf) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestCheckShallowCopy(t *testing.T) {
	t.Parallel()
	check := func(copyFn func(*workerv1.WorkerHeartbeat) *workerv1.WorkerHeartbeat) []string {
		r := &errorsOf{TB: t}
		chasmtest.CheckShallowCopy(r, copyFn)
		return r.errs
	}
	full := func(s *workerv1.WorkerHeartbeat) *workerv1.WorkerHeartbeat {
		c := shallowHeartbeat(s)
		c.ProtoReflect().SetUnknown(s.ProtoReflect().GetUnknown())
		return c
	}
	require.Empty(t, check(full))

	require.ElementsMatch(t, []string{
		"temporal.api.worker.v1.WorkerHeartbeat: the copy lost field sdk_version",
	}, check(func(s *workerv1.WorkerHeartbeat) *workerv1.WorkerHeartbeat {
		c := full(s)
		c.SdkVersion = ""
		return c
	}))
	require.ElementsMatch(t, []string{
		"temporal.api.worker.v1.WorkerHeartbeat: the copy copied nested message host_info instead of sharing it",
	}, check(func(s *workerv1.WorkerHeartbeat) *workerv1.WorkerHeartbeat {
		c := full(s)
		c.HostInfo = proto.CloneOf(s.HostInfo)
		return c
	}))
	require.ElementsMatch(t, []string{
		"temporal.api.worker.v1.WorkerHeartbeat: editing the copy's plugins changed the source: the container is shared",
	}, check(func(s *workerv1.WorkerHeartbeat) *workerv1.WorkerHeartbeat {
		c := full(s)
		c.Plugins = s.Plugins
		return c
	}))
	require.ElementsMatch(t, []string{
		"temporal.api.worker.v1.WorkerHeartbeat: the copy lost the fields this build does not know",
	}, check(shallowHeartbeat))
}

func TestCopyOnWrite(t *testing.T) {
	chasm.SetCopyOnWriteChecks(true) // only copy-on-write components check; only this test has one

	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	start := func(t *testing.T) *chasm.Execution {
		registry := chasmtest.NewRegistry(t, cowLibrary{})
		rc, ok := registry.Component("cow.reminder")
		require.True(t, ok)
		exec := chasm.NewExecution(registry, rc, chasm.ExecutionKey{NamespaceID: "ns", BusinessID: "r", RunID: "run"})
		m, err := exec.Start(now, func(chasm.MutableContext) (chasm.Component, error) {
			return &reminder.Reminder{ReminderState: &testpb.ReminderState{
				Deadline: timestamppb.New(now),
				LastHeartbeat: &workerv1.WorkerHeartbeat{
					WorkerIdentity: "first",
					HostInfo:       &workerv1.WorkerHostInfo{HostName: "host-a"},
					Plugins:        []*workerv1.PluginInfo{{Name: "a"}, {Name: "b"}},
				},
			}}, nil
		}, nil)
		require.NoError(t, err)
		exec.Apply(m)
		return exec
	}
	committed := func(t *testing.T, exec *chasm.Execution) *testpb.ReminderState {
		var st *testpb.ReminderState
		require.NoError(t, exec.Read(now, func(_ chasm.Context, c chasm.Component) error {
			st = proto.CloneOf(c.(*reminder.Reminder).ReminderState)
			return nil
		}))
		return st
	}

	t.Run("ATransactionReplacesWhatItChanges", func(t *testing.T) {
		exec := start(t)
		before := committed(t, exec)
		m, err := exec.Update(now, func(_ chasm.MutableContext, c chasm.Component) error {
			r := c.(*reminder.Reminder)
			r.FireCount++
			r.Deadline = timestamppb.New(now.Add(time.Minute))
			hb := proto.CloneOf(r.LastHeartbeat)
			hb.WorkerIdentity = "second"
			hb.Plugins = hb.Plugins[1:]
			r.LastHeartbeat = hb
			return nil
		})
		require.NoError(t, err)
		// Not applied yet: the committed state is as it was.
		require.True(t, proto.Equal(before, committed(t, exec)))
		exec.Apply(m)
		after := committed(t, exec)
		require.Equal(t, int64(1), after.GetFireCount())
		require.Equal(t, "second", after.GetLastHeartbeat().GetWorkerIdentity())
		require.Len(t, after.GetLastHeartbeat().GetPlugins(), 1)
	})

	t.Run("AChangeInPlaceFailsTheTransaction", func(t *testing.T) {
		exec := start(t)
		_, err := exec.Update(now, func(_ chasm.MutableContext, c chasm.Component) error {
			c.(*reminder.Reminder).LastHeartbeat.HostInfo.HostName = "host-b"
			return nil
		})
		require.ErrorContains(t, err, "modified the committed state in place")
	})
}

// shallowHeartbeat copies every field of a heartbeat but the unknown ones.
func shallowHeartbeat(s *workerv1.WorkerHeartbeat) *workerv1.WorkerHeartbeat {
	return &workerv1.WorkerHeartbeat{
		WorkerInstanceKey: s.WorkerInstanceKey, WorkerIdentity: s.WorkerIdentity, HostInfo: s.HostInfo,
		TaskQueue: s.TaskQueue, DeploymentVersion: s.DeploymentVersion, SdkName: s.SdkName,
		SdkVersion: s.SdkVersion, Status: s.Status, StartTime: s.StartTime, HeartbeatTime: s.HeartbeatTime,
		ElapsedSinceLastHeartbeat: s.ElapsedSinceLastHeartbeat, WorkflowTaskSlotsInfo: s.WorkflowTaskSlotsInfo,
		ActivityTaskSlotsInfo: s.ActivityTaskSlotsInfo, NexusTaskSlotsInfo: s.NexusTaskSlotsInfo,
		LocalActivitySlotsInfo: s.LocalActivitySlotsInfo, WorkflowPollerInfo: s.WorkflowPollerInfo,
		WorkflowStickyPollerInfo: s.WorkflowStickyPollerInfo, ActivityPollerInfo: s.ActivityPollerInfo,
		NexusPollerInfo: s.NexusPollerInfo, TotalStickyCacheHit: s.TotalStickyCacheHit,
		TotalStickyCacheMiss: s.TotalStickyCacheMiss, CurrentStickyCacheSize: s.CurrentStickyCacheSize,
		Plugins: slices.Clone(s.Plugins), Drivers: slices.Clone(s.Drivers), Environment: s.Environment,
	}
}
