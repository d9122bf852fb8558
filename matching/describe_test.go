package matching

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func (e *testEnv) describe(tq string) QueueDescription {
	e.t.Helper()
	d, err := e.m.DescribeActivityQueue(context.Background(), testNS, tq)
	require.NoError(e.t, err)
	return d
}

// taskAt is a task of the test queue scheduled at the given time.
func taskAt(id string, scheduled time.Time) ActivityTaskRef {
	return ActivityTaskRef{NamespaceID: testNS, TaskQueue: testTQ, ActivityID: id, RunID: "run-" + id, Stamp: 1, ScheduledTime: scheduled}
}

func TestDescribeActivityQueue(t *testing.T) {
	t.Parallel()

	t.Run("ListsPollersWithTheirLastPollAndRate", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		first := e.ts.Now()
		e.pollNow(activityPoll("w2"))
		e.ts.Advance(3 * time.Second)
		limited := activityPoll("w1")
		limited.RatePerSecond = 50
		e.pollNow(limited)
		e.ts.Advance(2 * time.Second)
		// Another queue's and another namespace's pollers are not this queue's.
		e.pollNow(ActivityPoll{NamespaceID: testNS, TaskQueue: "other", Identity: "id@w3", WorkerInstanceKey: "w3"})
		e.pollNow(ActivityPoll{NamespaceID: "ns-2", TaskQueue: testTQ, Identity: "id@w4", WorkerInstanceKey: "w4"})

		d := e.describe(testTQ)
		require.Equal(t, []Poller{
			{Identity: "id@w1", WorkerInstanceKey: "w1", LastAccessTime: first.Add(3 * time.Second), RatePerSecond: 50},
			{Identity: "id@w2", WorkerInstanceKey: "w2", LastAccessTime: first},
		}, d.Pollers)

		// A later poll of the same identity moves its last access time; still one entry.
		e.pollNow(activityPoll("w2"))
		d = e.describe(testTQ)
		require.Len(t, d.Pollers, 2)
		require.Equal(t, e.ts.Now(), d.Pollers[1].LastAccessTime)
	})

	t.Run("AWaitingPollIsListed", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e.waitingPoll(ctx, activityPoll("w1"))
		require.Equal(t, []string{"id@w1"}, identities(e.describe(testTQ)))
	})

	t.Run("PollersExpireAfterTheHistoryTTL", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{PollerHistoryTTL: time.Minute})
		e.m.Start()
		e.pollNow(activityPoll("w1"))
		e.ts.Advance(59 * time.Second)
		e.awaitSwept() // the sweep due in the meantime, which armed the next one
		e.pollNow(activityPoll("w2"))
		require.Equal(t, []string{"id@w1", "id@w2"}, identities(e.describe(testTQ)))

		e.ts.Advance(time.Second) // w1's last poll is a minute old
		require.Equal(t, []string{"id@w2"}, identities(e.describe(testTQ)))
		e.awaitSwept()
		e.m.mu.Lock()
		held := len(e.m.pollers[queueKey{testNS, testTQ}])
		e.m.mu.Unlock()
		require.Equal(t, 1, held, "the sweep dropped the expired record")
	})

	t.Run("AWorkerThatShutDownIsRemovedAtOnce", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		e.pollNow(activityPoll("w1"))
		e.pollNow(activityPoll("w2"))
		e.pollNow(ActivityPoll{NamespaceID: testNS, TaskQueue: "other", Identity: "id@w1", WorkerInstanceKey: "w1"})
		e.m.CompletePollsOfWorker(testNS, "w1")
		require.Equal(t, []string{"id@w2"}, identities(e.describe(testTQ)))
		require.Empty(t, e.describe("other").Pollers)
		e.m.mu.Lock()
		defer e.m.mu.Unlock()
		require.NotContains(t, e.m.pollersByWorker, workerKey{testNS, "w1"})
	})

	t.Run("BacklogCountAndAge", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		now := e.ts.Now()
		require.NoError(t, e.m.AddActivityTask(taskAt("a", now.Add(-10*time.Second))))
		require.NoError(t, e.m.AddActivityTask(taskAt("b", now.Add(-4*time.Second))))
		require.NoError(t, e.m.AddActivityTask(taskAt("c", now)))
		d := e.describe(testTQ)
		require.EqualValues(t, 3, d.BacklogCount)
		require.Equal(t, 10*time.Second, d.BacklogAge, "the age of the next task to dispatch")

		ref, ok := e.pollNow(activityPoll("w1"))
		require.True(t, ok)
		require.Equal(t, "a", ref.ActivityID)
		d = e.describe(testTQ)
		require.EqualValues(t, 2, d.BacklogCount)
		require.Equal(t, 4*time.Second, d.BacklogAge)

		e.pollNow(activityPoll("w1"))
		e.pollNow(activityPoll("w1"))
		d = e.describe(testTQ)
		require.Zero(t, d.BacklogCount)
		require.Zero(t, d.BacklogAge)
	})

	t.Run("AddAndDispatchRates", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		for i := range 10 {
			require.NoError(t, e.m.AddActivityTask(taskAt(fmt.Sprint(i), e.ts.Now())))
		}
		for range 4 {
			_, ok := e.pollNow(activityPoll("w1"))
			require.True(t, ok)
		}
		e.ts.Advance(10 * time.Second)
		d := e.describe(testTQ)
		require.InDelta(t, 1.0, d.TasksAddRate, 1e-9, "10 tasks in the 10 s since the first")
		require.InDelta(t, 0.4, d.TasksDispatchRate, 1e-9)

		// A task handed straight to a waiting poll counts both ways.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res := e.waitingPoll(ctx, ActivityPoll{NamespaceID: testNS, TaskQueue: "sync", Identity: "id@w2"})
		require.NoError(t, e.m.AddActivityTask(ActivityTaskRef{NamespaceID: testNS, TaskQueue: "sync", ActivityID: "s", Stamp: 1}))
		require.True(t, receive(t, res).ok)
		d = e.describe("sync")
		require.InDelta(t, 1.0, d.TasksAddRate, 1e-9, "one task, rated over at least a second")
		require.InDelta(t, 1.0, d.TasksDispatchRate, 1e-9)

		// Beyond the window nothing is left.
		e.ts.Advance(rateWindowSpan + rateBucketSpan)
		d = e.describe(testTQ)
		require.Zero(t, d.TasksAddRate)
		require.Zero(t, d.TasksDispatchRate)
	})

	t.Run("AnUnusedQueueIsEmpty", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		require.Equal(t, QueueDescription{}, e.describe("never-used"))
		_, err := e.m.DescribeActivityQueue(context.Background(), testNS, "")
		require.ErrorIs(t, err, ErrInvalidArgument)
	})

	t.Run("NotOwnedQueueIsRefusedAndItsPollersForgotten", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		e.pollNow(activityPoll("w1"))
		e.m.SetOwnership(func(string, string) bool { return false })
		_, err := e.m.DescribeActivityQueue(context.Background(), testNS, testTQ)
		require.ErrorIs(t, err, ErrNotOwner)
		e.m.ReleaseUnowned()
		e.m.SetOwnership(nil)
		require.Empty(t, e.describe(testTQ).Pollers, "the new owner records the workers as they poll it")
	})

	t.Run("StoppedIsRefused", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		e.m.Stop()
		_, err := e.m.DescribeActivityQueue(context.Background(), testNS, testTQ)
		require.ErrorIs(t, err, ErrStopped)
	})
}

func identities(d QueueDescription) []string {
	var out []string
	for _, p := range d.Pollers {
		out = append(out, p.Identity)
	}
	return out
}

func TestClientDescribeActivityQueueThroughAnotherHost(t *testing.T) {
	t.Parallel()
	hosts := newTestCluster(t, 3, Options{})
	a, b, c := hosts[0], hosts[1], hosts[2]
	q := queueOwnedBy(t, "tq", a, members(hosts...), nil, nil)

	p := pollOf(q, "w1")
	p.RatePerSecond = 7
	poll := c.pollAsync(pollCtx(t), p)
	a.awaitWaiting(t, q)
	now := time.Now()
	require.NoError(t, b.client.AddActivityTask(context.Background(), ActivityTaskRef{
		NamespaceID: testNS, TaskQueue: q, ActivityID: "x", Stamp: 1, ScheduledTime: now}))
	require.True(t, receive(t, poll).ok)
	require.NoError(t, b.client.AddActivityTask(context.Background(), ActivityTaskRef{
		NamespaceID: testNS, TaskQueue: q, ActivityID: "y", Stamp: 1, ScheduledTime: now.Add(-time.Hour)}))

	d, err := b.client.DescribeActivityQueue(context.Background(), testNS, q)
	require.NoError(t, err)
	require.Equal(t, a.host.ID, d.Owner)
	require.Len(t, d.Pollers, 1)
	require.Equal(t, "id@w1", d.Pollers[0].Identity)
	require.Equal(t, "w1", d.Pollers[0].WorkerInstanceKey)
	require.Equal(t, 7.0, d.Pollers[0].RatePerSecond)
	require.EqualValues(t, 1, d.BacklogCount)
	require.GreaterOrEqual(t, d.BacklogAge, time.Hour)
	require.Positive(t, d.TasksAddRate)
	require.Positive(t, d.TasksDispatchRate)
	require.EqualValues(t, 1, b.forwarded("DescribeActivityQueue"))

	// The owner answers alike, without forwarding.
	d2, err := a.client.DescribeActivityQueue(context.Background(), testNS, q)
	require.NoError(t, err)
	require.Equal(t, a.host.ID, d2.Owner)
	require.Len(t, d2.Pollers, 1)
	require.Equal(t, d.Pollers[0].Identity, d2.Pollers[0].Identity)
	require.True(t, d.Pollers[0].LastAccessTime.Equal(d2.Pollers[0].LastAccessTime), "the same record, through the wire or not")
	require.Zero(t, a.forwarded("DescribeActivityQueue"))
}
