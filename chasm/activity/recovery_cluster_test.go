package activity_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/chasm/activity"
	"github.com/vigilhq/vigil/common/membership"
)

// changingMonitor is a membership.Monitor whose members the test changes.
type changingMonitor struct {
	self membership.Host

	mu      sync.Mutex
	members []membership.Host
	subs    []chan struct{}
}

func (m *changingMonitor) Self() membership.Host { return m.self }

func (m *changingMonitor) Members() []membership.Host {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

func (m *changingMonitor) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs = append(m.subs, ch)
	return ch, func() {}
}

func (m *changingMonitor) set(hosts ...membership.Host) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.members = hosts
	for _, ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

var (
	hostA = membership.Host{ID: "host-a"}
	hostB = membership.Host{ID: "host-b"}
)

func TestRequeueDispatchedOfOwnedShards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 40
	for i := range n {
		b.start(fmt.Sprintf("act-%d", i))
	}
	requeuedBy := func(self membership.Host) map[string]bool {
		monitor := &changingMonitor{self: self}
		monitor.set(hostA, hostB)
		rec := &recordingDispatcher{}
		got, err := activity.RequeueDispatchedWhere(context.Background(), b.engine, b.engine.Registry(), []string{testNamespaceID},
			activity.OwnedShards(testNumShards, monitor), rec)
		require.NoError(t, err)
		out := map[string]bool{}
		for _, r := range rec.dispatched() {
			out[r.ActivityID] = true
		}
		require.Len(t, out, got)
		return out
	}
	a, bb := requeuedBy(hostA), requeuedBy(hostB)
	require.NotEmpty(t, a)
	require.NotEmpty(t, bb)
	for id := range a {
		require.False(t, bb[id], "%s re-queued by both hosts", id)
	}
	require.Len(t, a, n-len(bb), "every activity is re-queued by exactly one host")
}

func TestRequeueDispatchedContinuesPastRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("act-1")
	b.start("act-2")
	rec := &recordingDispatcher{failWith: fmt.Errorf("owner unreachable")}
	n, err := activity.RequeueDispatchedWhere(context.Background(), b.engine, b.engine.Registry(), []string{testNamespaceID}, nil, rec)
	require.Zero(t, n)
	var refused *activity.RequeueError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, 2, refused.Refused)
}

// TestMembershipRequeuer: after members change, the host re-queues the dispatched activities of
// the shards it now owns, once the change has settled.
func TestMembershipRequeuer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 20
	for i := range n {
		b.start(fmt.Sprintf("act-%d", i))
	}
	monitor := &changingMonitor{self: hostA}
	monitor.set(hostA, hostB)
	rec := &recordingDispatcher{}
	scanned := make(chan int, 16)
	r := activity.NewMembershipRequeuer(activity.MembershipRequeuerParams{
		Lister: b.engine, Registry: b.engine.Registry(), NamespaceIDs: func() []string { return []string{testNamespaceID} },
		NumShards: testNumShards, Monitor: monitor, Dispatcher: rec,
		Debounce: time.Millisecond, MaxDelay: time.Millisecond, Logger: zaptest.NewLogger(t),
		Scanned: func(requeued int, err error) {
			require.NoError(t, err)
			scanned <- requeued
		},
	})
	r.Start()
	t.Cleanup(r.Stop)

	// host-b leaves: host-a owns every shard and re-queues every dispatched activity.
	monitor.set(hostA)
	select {
	case got := <-scanned:
		require.Equal(t, n, got)
	case <-time.After(10 * time.Second):
		t.Fatal("no scan after the membership change")
	}
	require.Len(t, rec.dispatched(), n)
}
