package matching

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOwnership(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) (*testEnv, *atomic.Bool) {
		e := newTestEnv(t, Options{})
		var owned atomic.Bool
		owned.Store(true)
		e.m.SetOwnership(func(ns, queue string) bool { return queue != testTQ || owned.Load() })
		return e, &owned
	}

	t.Run("CallsForAnotherHostsQueueAreRefused", func(t *testing.T) {
		t.Parallel()
		e, owned := setup(t)
		owned.Store(false)
		require.ErrorIs(t, e.m.AddActivityTask(taskN(1)), ErrNotOwner)
		require.ErrorIs(t, e.m.ReturnActivityTask(taskN(1)), ErrNotOwner)
		_, _, err := e.m.PollActivityTask(context.Background(), activityPoll("w1"))
		require.ErrorIs(t, err, ErrNotOwner)
		require.ErrorIs(t, e.m.AddWorkerCommand(testNS, testTQ, WorkerCommand{ID: "c"}), ErrNotOwner)
		_, _, err = e.m.PollWorkerCommand(context.Background(), testNS, testTQ)
		require.ErrorIs(t, err, ErrNotOwner)
		require.False(t, e.m.Owns(testNS, testTQ))
		require.True(t, e.m.Owns(testNS, "other"))
		require.NoError(t, e.m.AddActivityTask(ActivityTaskRef{NamespaceID: testNS, TaskQueue: "other", ActivityID: "a"}))
	})

	t.Run("ReleaseAnswersPollsAndReturnsTasksInOrder", func(t *testing.T) {
		t.Parallel()
		e, owned := setup(t)
		for _, i := range []int{3, 1, 2} {
			require.NoError(t, e.m.AddActivityTask(taskN(i)))
		}
		require.NoError(t, e.m.AddWorkerCommand(testNS, testTQ, WorkerCommand{ID: "cmd"}))
		other := ActivityPoll{NamespaceID: testNS, TaskQueue: "other", WorkerInstanceKey: "w2"}
		waiting := e.waitingPoll(context.Background(), other)

		owned.Store(false)
		released := e.m.ReleaseUnowned()
		require.Equal(t, []ActivityTaskRef{taskN(1), taskN(2), taskN(3)}, released.Tasks)
		require.Equal(t, []QueuedCommand{{NamespaceID: testNS, ControlQueue: testTQ, Command: WorkerCommand{ID: "cmd"}}}, released.Commands)
		require.Zero(t, e.gauge("matching_backlog"))
		requireNotReceived(t, waiting) // a queue still owned keeps its polls

		// Now "other" moves too: its waiting poll is answered empty at once.
		e.m.SetOwnership(func(string, string) bool { return false })
		released = e.m.ReleaseUnowned()
		require.Equal(t, 1, released.Polls)
		res := receive(t, waiting)
		require.NoError(t, res.err)
		require.False(t, res.ok)
		activityQueues, commandQueues, idle := e.queueCounts()
		require.Empty(t, activityQueues)
		require.Zero(t, commandQueues)
		require.Zero(t, idle)
		// The worker's poll index no longer holds the released poll.
		require.Zero(t, e.m.CompletePollsOfWorker(testNS, "w2"))
	})

	t.Run("NilOwnershipOwnsEverything", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		require.NoError(t, e.m.AddActivityTask(taskN(1)))
		require.Empty(t, e.m.ReleaseUnowned().Tasks)
		require.Equal(t, 1, e.backlogLen(testNS, testTQ))
	})
}
