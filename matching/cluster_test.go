package matching

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/common/membership"
	matchingpb "github.com/vigilhq/vigil/matching/gen/matchingpb/v1"
)

// testMonitor is one host's view of the members, changed by the test (per host, so that two
// hosts can disagree for a while, as they do in a real cluster).
type testMonitor struct {
	self membership.Host

	mu      sync.Mutex
	members []membership.Host
	subs    map[chan struct{}]struct{}
}

func (m *testMonitor) Self() membership.Host { return m.self }

func (m *testMonitor) Members() []membership.Host {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

func (m *testMonitor) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subs == nil {
		m.subs = make(map[chan struct{}]struct{})
	}
	m.subs[ch] = struct{}{}
	return ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.subs, ch)
	}
}

func (m *testMonitor) set(hosts ...membership.Host) {
	hosts = slices.Clone(hosts)
	slices.SortFunc(hosts, func(a, b membership.Host) int { return compareIDs(a.ID, b.ID) })
	m.mu.Lock()
	defer m.mu.Unlock()
	m.members = hosts
	for ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func compareIDs(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// testHost is one host: a matcher on the real clock, its MatchingService on a gRPC server,
// and a routing client over its own monitor.
type testHost struct {
	host    membership.Host
	m       *Matcher
	client  *Client
	monitor *testMonitor
	server  *grpc.Server
	scope   tally.TestScope
	waiting chan string
}

// newTestCluster starts n hosts ("host-0"...), all members of each other's view. Calls retry
// "not owner" up to 100 times, so that no test depends on how fast a host learns of a change.
func newTestCluster(t testing.TB, n int, opts Options) []*testHost {
	return newTestClusterWith(t, n, opts, ClientOptions{NotOwnerAttempts: 100})
}

func newTestClusterWith(t testing.TB, n int, opts Options, clientOpts ClientOptions) []*testHost {
	t.Helper()
	hosts := make([]*testHost, n)
	var all []membership.Host
	for i := range hosts {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		h := &testHost{
			host:    membership.Host{ID: fmt.Sprintf("host-%d", i), HistoryAddress: lis.Addr().String()},
			scope:   tally.NewTestScope("", nil),
			waiting: make(chan string, 1024),
		}
		o := opts
		o.TestHooks = &TestHooks{PollWaiting: func(q string) { h.waiting <- q }}
		h.m = New(nil, o, zaptest.NewLogger(t), h.scope)
		h.m.Start()
		h.server = grpc.NewServer()
		matchingpb.RegisterMatchingServiceServer(h.server, NewService(h.m))
		go func() { _ = h.server.Serve(lis) }()
		h.monitor = &testMonitor{self: h.host}
		hosts[i] = h
		all = append(all, h.host)
	}
	for _, h := range hosts {
		h.monitor.set(all...)
		co := clientOpts
		co.Logger, co.Scope, co.NotOwnerRetryMax = zaptest.NewLogger(t), h.scope, 100*time.Millisecond
		h.client = NewClient(h.m, h.monitor, co)
		h.client.Start()
	}
	t.Cleanup(func() {
		for _, h := range hosts {
			h.client.Stop()
			h.server.Stop()
			h.m.Stop()
		}
	})
	return hosts
}

func members(hosts ...*testHost) []membership.Host {
	out := make([]membership.Host, len(hosts))
	for i, h := range hosts {
		out[i] = h.host
	}
	return out
}

// queueOwnedBy returns a task queue name that owner owns among before and, if after is not
// nil, newOwner owns among after.
func queueOwnedBy(t testing.TB, prefix string, owner *testHost, before []membership.Host, newOwner *testHost, after []membership.Host) string {
	t.Helper()
	for i := range 10_000 {
		q := fmt.Sprintf("%s-%d", prefix, i)
		if h, _ := membership.Owner(membership.TaskQueueKey(testNS, q), before); h.ID != owner.host.ID {
			continue
		}
		if newOwner != nil {
			if h, _ := membership.Owner(membership.TaskQueueKey(testNS, q), after); h.ID != newOwner.host.ID {
				continue
			}
		}
		return q
	}
	t.Fatal("no such task queue")
	return ""
}

func (h *testHost) pollAsync(ctx context.Context, p ActivityPoll) <-chan pollResult {
	ch := make(chan pollResult, 1)
	go func() {
		ref, ok, err := h.client.PollActivityTask(ctx, p)
		ch <- pollResult{ref, ok, err}
	}()
	return ch
}

func (h *testHost) awaitWaiting(t *testing.T, queue string) {
	t.Helper()
	require.Equal(t, queue, receive(t, h.waiting))
}

func (h *testHost) forwarded(operation string) int64 {
	for _, c := range h.scope.Snapshot().Counters() {
		if c.Name() == CallsForwarded.Name() && c.Tags()["operation"] == operation {
			return c.Value()
		}
	}
	return 0
}

func queueTask(q, id string, stamp int64) ActivityTaskRef {
	return ActivityTaskRef{NamespaceID: testNS, TaskQueue: q, ActivityID: id, RunID: "run-" + id, Stamp: stamp, ScheduledTime: baseTime}
}

func pollOf(q, worker string) ActivityPoll {
	return ActivityPoll{NamespaceID: testNS, TaskQueue: q, Identity: "id@" + worker, WorkerInstanceKey: worker}
}

// pollCtx is a poll's context: far enough that no test waits for it.
func pollCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestClient(t *testing.T) {
	t.Parallel()

	t.Run("TaskAddedOnOneHostIsPolledThroughAnother", func(t *testing.T) {
		t.Parallel()
		hosts := newTestCluster(t, 3, Options{})
		a, b, c := hosts[0], hosts[1], hosts[2]
		q := queueOwnedBy(t, "tq", a, members(hosts...), nil, nil)

		require.NoError(t, b.client.AddActivityTask(context.Background(), queueTask(q, "act-1", 1)))
		require.Equal(t, 1, a.m.backlogLenOf(testNS, q), "queued on the owner, not where it was added")
		require.Zero(t, b.m.backlogLenOf(testNS, q))

		res := receive(t, c.pollAsync(pollCtx(t), pollOf(q, "w1")))
		require.NoError(t, res.err)
		require.True(t, res.ok)
		require.Equal(t, "act-1", res.ref.ActivityID)
		require.EqualValues(t, 1, b.forwarded("AddActivityTask"))
		require.EqualValues(t, 1, c.forwarded("PollActivityTask"))
	})

	t.Run("ForwardedPollWaitsAndIsMatched", func(t *testing.T) {
		t.Parallel()
		hosts := newTestCluster(t, 3, Options{})
		a, b, c := hosts[0], hosts[1], hosts[2]
		q := queueOwnedBy(t, "tq", a, members(hosts...), nil, nil)

		poll := c.pollAsync(pollCtx(t), pollOf(q, "w1"))
		a.awaitWaiting(t, q)
		require.NoError(t, b.client.AddActivityTask(context.Background(), queueTask(q, "act-1", 1)))
		res := receive(t, poll)
		require.NoError(t, res.err)
		require.Equal(t, "act-1", res.ref.ActivityID)
	})

	t.Run("OwnerAnswersLocally", func(t *testing.T) {
		t.Parallel()
		hosts := newTestCluster(t, 2, Options{})
		a := hosts[0]
		q := queueOwnedBy(t, "tq", a, members(hosts...), nil, nil)
		require.NoError(t, a.client.AddActivityTask(context.Background(), queueTask(q, "act-1", 1)))
		res := receive(t, a.pollAsync(pollCtx(t), pollOf(q, "w1")))
		require.True(t, res.ok)
		require.Zero(t, a.forwarded("AddActivityTask")+a.forwarded("PollActivityTask"))
	})

	t.Run("ErrorsAreTheMatchersWhicheverHostServes", func(t *testing.T) {
		t.Parallel()
		hosts := newTestCluster(t, 2, Options{BacklogCap: 1})
		a, b := hosts[0], hosts[1]
		q := queueOwnedBy(t, "tq", a, members(hosts...), nil, nil)
		require.NoError(t, b.client.AddActivityTask(context.Background(), queueTask(q, "act-1", 1)))
		require.ErrorIs(t, b.client.AddActivityTask(context.Background(), queueTask(q, "act-2", 1)), ErrBacklogFull)
		require.ErrorIs(t, b.client.AddActivityTask(context.Background(), ActivityTaskRef{NamespaceID: testNS}), ErrInvalidArgument)
	})

	t.Run("CompletePollsOfWorkerReachesEveryOwner", func(t *testing.T) {
		t.Parallel()
		hosts := newTestCluster(t, 3, Options{})
		a, b, c := hosts[0], hosts[1], hosts[2]
		qa := queueOwnedBy(t, "tq-a", a, members(hosts...), nil, nil)
		qb := queueOwnedBy(t, "tq-b", b, members(hosts...), nil, nil)
		pa := c.pollAsync(pollCtx(t), pollOf(qa, "w1"))
		a.awaitWaiting(t, qa)
		pb := c.pollAsync(pollCtx(t), pollOf(qb, "w1"))
		b.awaitWaiting(t, qb)

		require.Equal(t, 2, c.client.CompletePollsOfWorker(testNS, "w1"))
		for _, p := range []<-chan pollResult{pa, pb} {
			res := receive(t, p)
			require.NoError(t, res.err)
			require.False(t, res.ok)
		}
		// The tombstone is on every owner: a later poll of the worker ends at once.
		res := receive(t, c.pollAsync(pollCtx(t), pollOf(qb, "w1")))
		require.NoError(t, res.err)
		require.False(t, res.ok)
	})

	t.Run("WorkerCommandsAreForwarded", func(t *testing.T) {
		t.Parallel()
		hosts := newTestCluster(t, 3, Options{})
		a, b, c := hosts[0], hosts[1], hosts[2]
		cq := queueOwnedBy(t, "temporal-sys/worker-commands/ns/key", a, members(hosts...), nil, nil)
		require.NoError(t, b.client.AddWorkerCommand(context.Background(), testNS, cq, WorkerCommand{ID: "cmd-1", Payload: []byte("x")}))
		cmd, ok, err := c.client.PollWorkerCommand(pollCtx(t), testNS, cq)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, WorkerCommand{ID: "cmd-1", Payload: []byte("x")}, cmd)
		require.True(t, c.client.AckWorkerCommand(testNS, cq, "cmd-1"))
		require.False(t, b.client.AckWorkerCommand(testNS, cq, "cmd-1"), "acknowledged once")
	})
}

// TestOwnershipChange: a host joins and takes queues that had tasks queued and polls waiting
// on their previous owner. No task is lost, each is delivered once, and the waiting polls are
// answered empty at once so that the SDK polls the new owner.
func TestOwnershipChange(t *testing.T) {
	t.Parallel()
	hosts := newTestCluster(t, 3, Options{})
	a, b, c := hosts[0], hosts[1], hosts[2]
	before, after := members(a, b), members(a, b, c)
	// c starts outside the cluster.
	for _, h := range hosts {
		h.monitor.set(before...)
	}
	queued := queueOwnedBy(t, "queued", a, before, c, after)
	polled := queueOwnedBy(t, "polled", a, before, c, after)
	cq := queueOwnedBy(t, "temporal-sys/worker-commands/ns/key", a, before, c, after)

	const tasks = 20
	for i := range tasks {
		require.NoError(t, b.client.AddActivityTask(context.Background(), queueTask(queued, fmt.Sprintf("act-%d", i), 1)))
	}
	require.Equal(t, tasks, a.m.backlogLenOf(testNS, queued))
	require.NoError(t, b.client.AddWorkerCommand(context.Background(), testNS, cq, WorkerCommand{ID: "cmd-1"}))
	waiting := b.pollAsync(pollCtx(t), pollOf(polled, "w1"))
	a.awaitWaiting(t, polled)

	// c joins. a learns it first, and answers its waiting poll empty at once; c, the new owner,
	// learns it after a has handed its tasks over (they come back, and a routes them again);
	// b learns it last: until then it still routes to a, which answers "not owner".
	a.monitor.set(after...)
	res := receive(t, waiting)
	require.NoError(t, res.err)
	require.False(t, res.ok, "a poll waiting on the previous owner is answered empty")
	c.monitor.set(after...)

	// A poll through b meets a's "not owner" and waits for b's view; b catches up.
	stale := b.pollAsync(pollCtx(t), pollOf(queued, "w2"))
	b.monitor.set(after...)

	got := map[string]int{}
	res = receive(t, stale)
	require.NoError(t, res.err)
	require.True(t, res.ok)
	got[res.ref.ActivityID]++
	for len(got) < tasks {
		// Through every host: each reaches the new owner.
		for _, h := range hosts {
			if len(got) == tasks {
				break
			}
			res := receive(t, h.pollAsync(pollCtx(t), pollOf(queued, "w3")))
			require.NoError(t, res.err)
			require.True(t, res.ok)
			got[res.ref.ActivityID]++
		}
	}
	for id, n := range got {
		require.Equal(t, 1, n, "task %s delivered more than once", id)
	}
	require.Zero(t, a.m.backlogLenOf(testNS, queued))
	require.Zero(t, c.m.backlogLenOf(testNS, queued))
	// Counted once the new owner's answer is back, which may be after the tasks were polled.
	require.Eventually(t, func() bool { return a.counter(TasksHandedOver.Name()) == tasks }, eventTimeout, time.Millisecond)

	cmd, ok, err := b.client.PollWorkerCommand(pollCtx(t), testNS, cq)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "cmd-1", cmd.ID)

	// A task added through a host whose view is stale meets "not owner", and is queued on the
	// new owner once that host catches up.
	b.monitor.set(before...)
	added := make(chan error, 1)
	go func() { added <- b.client.AddActivityTask(context.Background(), queueTask(queued, "late", 1)) }()
	b.monitor.set(after...)
	require.NoError(t, receive(t, added))
	require.Equal(t, 1, c.m.backlogLenOf(testNS, queued))
}

// TestPollSurvivesDeadOwner: the owner of a queue dies; a poll forwarded to it retries until
// the members drop the dead host, then reaches the new owner, without an error.
func TestPollSurvivesDeadOwner(t *testing.T) {
	t.Parallel()
	hosts := newTestCluster(t, 3, Options{})
	a, b, c := hosts[0], hosts[1], hosts[2]
	q := queueOwnedBy(t, "tq", a, members(hosts...), c, members(b, c))
	a.server.Stop()

	poll := b.pollAsync(pollCtx(t), pollOf(q, "w1"))
	for _, h := range []*testHost{b, c} {
		h.monitor.set(members(b, c)...)
	}
	c.awaitWaiting(t, q)
	require.NoError(t, c.client.AddActivityTask(context.Background(), queueTask(q, "act-1", 1)))
	res := receive(t, poll)
	require.NoError(t, res.err)
	require.True(t, res.ok)
}

func (h *testHost) counter(name string) int64 {
	var n int64
	for _, c := range h.scope.Snapshot().Counters() {
		if c.Name() == name {
			n += c.Value()
		}
	}
	return n
}

// backlogLenOf is the number of tasks queued for a queue.
func (m *Matcher) backlogLenOf(ns, tq string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q := m.activityQueues[queueKey{ns, tq}]; q != nil {
		return q.backlog.Len()
	}
	return 0
}

// TestClientWhenOwnershipDoesNotSettle: two hosts that disagree for good about a queue's owner
// (each thinks the other owns it). An add gives up with Unavailable, which history retries; a
// poll answers empty at its deadline, not with an error.
func TestClientWhenOwnershipDoesNotSettle(t *testing.T) {
	t.Parallel()
	hosts := newTestClusterWith(t, 2, Options{PollDeadlineMargin: 200 * time.Millisecond}, ClientOptions{})
	a, b := hosts[0], hosts[1]
	q := queueOwnedBy(t, "tq", a, members(a, b), nil, nil)
	// b sees only a; a sees only b.
	b.monitor.set(a.host)
	a.monitor.set(b.host)
	require.Eventually(t, func() bool { return !a.m.Owns(testNS, q) }, eventTimeout, time.Millisecond)

	err := b.client.AddActivityTask(context.Background(), queueTask(q, "act-1", 1))
	var unavailable *serviceerror.Unavailable
	require.ErrorAs(t, err, &unavailable)

	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	_, ok, err := b.client.PollActivityTask(ctx, pollOf(q, "w1"))
	require.NoError(t, err)
	require.False(t, ok)
}
