package frontend

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/chasm/worker/watch"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/membership"
)

// fanMembers is a membership.Monitor whose members a test sets.
type fanMembers struct {
	self    membership.Host
	mu      sync.Mutex
	members []membership.Host
	subs    map[chan struct{}]struct{}
}

func (m *fanMembers) Self() membership.Host { return m.self }

func (m *fanMembers) Members() []membership.Host {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

func (m *fanMembers) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs[ch] = struct{}{}
	return ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.subs, ch)
	}
}

func (m *fanMembers) set(hosts ...membership.Host) {
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

// remoteHost is a history host's hub served over gRPC, as on the history port.
type remoteHost struct {
	hub    *watch.Hub
	ws     *watch.Server
	server *grpc.Server
	host   membership.Host
}

func startRemoteHost(t *testing.T, id, address string, hub *watch.Hub) *remoteHost {
	t.Helper()
	lis, err := net.Listen("tcp", address)
	require.NoError(t, err)
	r := &remoteHost{hub: hub, ws: watch.NewServer(hub), server: grpc.NewServer(),
		host: membership.Host{ID: id, HistoryAddress: lis.Addr().String()}}
	workerpb.RegisterWorkerWatchServiceServer(r.server, r.ws)
	go func() { _ = r.server.Serve(lis) }()
	t.Cleanup(r.server.Stop)
	return r
}

func fanState(status workerpb.WorkerStatus, machine string, heartbeats, lapses int64) *workerpb.WorkerState {
	return &workerpb.WorkerState{Status: status, HeartbeatCount: heartbeats, InactiveEpoch: lapses,
		LastHeartbeat: &workerapipb.WorkerHeartbeat{HostInfo: &workerapipb.WorkerHostInfo{HostName: machine}}}
}

func publishTo(hub *watch.Hub, kind worker.ChangeKind, key string, s *workerpb.WorkerState) {
	hub.Publish(worker.Change{Kind: kind, NamespaceID: "ns", WorkerInstanceKey: key, State: s})
}

// expectEvents waits for the subscription's next events until it has want (kind:key or
// kind:machine for host events), in order; a resync fails the test.
func expectEvents(t *testing.T, s *watch.Subscription, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []string
	for len(got) < len(want) {
		events, _, overflow, err := s.Next(ctx)
		require.NoError(t, err, "got %v, want %v", got, want)
		require.False(t, overflow, "unexpected resync: %s", s.ResyncReason())
		for _, ev := range events {
			got = append(got, fanKind(ev))
		}
	}
	require.Equal(t, want, got)
}

func fanKind(ev watch.Event) string {
	names := map[watch.Kind]string{watch.KindRegistered: "REGISTERED", watch.KindHeartbeat: "HEARTBEAT", watch.KindInactive: "INACTIVE", watch.KindResurrected: "RESURRECTED",
		watch.KindHostOnline: "HOST_ONLINE", watch.KindHostOffline: "HOST_OFFLINE"}
	return names[ev.Kind] + ":" + ev.WorkerInstanceKey + map[bool]string{true: ev.HostName}[ev.WorkerInstanceKey == ""]
}

// expectResync waits for the subscription to be told to resync and returns the reason.
func expectResync(t *testing.T, s *watch.Subscription) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		events, _, overflow, err := s.Next(ctx)
		require.NoError(t, err)
		if overflow {
			return s.ResyncReason()
		}
		require.Empty(t, events, "events where a resync was expected")
	}
}

// newTestFanin starts a fan-in and returns it with a watcher of namespace "ns" on its hub,
// subscribed before the fan-in relays anything: a watcher without a cursor starts at the next
// event, so one subscribed after Start could miss what the fan-in relayed first.
func newTestFanin(t *testing.T, local *watch.Hub, members *fanMembers) (*WatchFanin, *watch.Subscription) {
	t.Helper()
	dial := func(address string) (grpc.ClientConnInterface, error) {
		return grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	f := NewWatchFanin(watch.NewHub(watch.Options{TimeSource: clock.NewRealTimeSource()}), local, members, dial, zap.NewNop())
	f.leaveGrace = 20 * time.Millisecond
	sub, _, _ := f.Hub().Subscribe("ns", 0, 0, 0)
	t.Cleanup(sub.Close)
	f.Start()
	t.Cleanup(f.Stop)
	return f, sub
}

// TestWatchFaninMergesHosts: a frontend's watchers see the changes of its own host and of
// another, in each worker's order, with a machine online while any of its workers is ACTIVE on
// either host; a broken connection to the other host resumes by its cursor without a resync;
// a graceful stop of the other host loses nothing, a crash and a restart make watchers resync.
func TestWatchFaninMergesHosts(t *testing.T) {
	active, inactive := workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE
	ts := clock.NewRealTimeSource()
	local := watch.NewHub(watch.Options{TimeSource: ts})
	self := membership.Host{ID: "a", HistoryAddress: "in-process"}
	b := startRemoteHost(t, "b", "127.0.0.1:0", watch.NewHub(watch.Options{TimeSource: ts}))
	// Changes committed on b before the frontend follows it are relayed too (b's log holds them).
	publishTo(b.hub, worker.ChangeRegistered, "w-b", fanState(active, "m1", 1, 0))
	members := &fanMembers{self: self, members: []membership.Host{self, b.host}, subs: map[chan struct{}]struct{}{}}
	_, sub := newTestFanin(t, local, members)

	expectEvents(t, sub, "REGISTERED:w-b", "HOST_ONLINE:m1")
	publishTo(local, worker.ChangeRegistered, "w-a", fanState(active, "m1", 1, 0))
	expectEvents(t, sub, "REGISTERED:w-a")
	for i := int64(2); i <= 4; i++ {
		publishTo(b.hub, worker.ChangeHeartbeat, "w-b", fanState(active, "m1", i, 0))
		expectEvents(t, sub, "HEARTBEAT:w-b")
	}
	publishTo(b.hub, worker.ChangeInactive, "w-b", fanState(inactive, "m1", 4, 1))
	expectEvents(t, sub, "INACTIVE:w-b") // m1 still has w-a on host a
	publishTo(local, worker.ChangeInactive, "w-a", fanState(inactive, "m1", 1, 1))
	expectEvents(t, sub, "INACTIVE:w-a", "HOST_OFFLINE:m1")

	// The connection breaks; what b commits meanwhile comes once it is back, from the cursor.
	b.server.Stop()
	publishTo(b.hub, worker.ChangeResurrected, "w-b", fanState(active, "m1", 5, 1))
	b = startRemoteHost(t, "b", b.host.HistoryAddress, b.hub)
	expectEvents(t, sub, "RESURRECTED:w-b", "HOST_ONLINE:m1")

	// A graceful stop sends everything, then ends: nothing lost, no resync; a stopping host
	// takes no new stream (it would send its log again).
	publishTo(b.hub, worker.ChangeHeartbeat, "w-b", fanState(active, "m1", 6, 1))
	b.ws.Stop(true)
	expectEvents(t, sub, "HEARTBEAT:w-b")
	b.server.GracefulStop()
	// The host comes back under the same address (a new process: its log starts over).
	b = startRemoteHost(t, "b", b.host.HistoryAddress, watch.NewHub(watch.Options{TimeSource: ts}))
	publishTo(b.hub, worker.ChangeHeartbeat, "w-b", fanState(active, "m1", 7, 1))
	expectEvents(t, sub, "HEARTBEAT:w-b")
	// It stops gracefully and leaves; it comes back under another address, and crashes.
	members.set(self)
	b.ws.Stop(true)
	b.server.GracefulStop()
	b = startRemoteHost(t, "b", "127.0.0.1:0", watch.NewHub(watch.Options{TimeSource: ts}))
	members.set(self, b.host)
	publishTo(b.hub, worker.ChangeHeartbeat, "w-b", fanState(active, "m1", 8, 1))
	expectEvents(t, sub, "HEARTBEAT:w-b")
	b.ws.Stop(false)
	b.server.Stop()
	members.set(self)
	require.Contains(t, expectResync(t, sub), "history host b left the cluster")
}

// TestWatchFaninLargeBatches: a backlog larger than one response arrives whole, and the
// stream resumes after it, without repeating any of it.
func TestWatchFaninLargeBatches(t *testing.T) {
	active := workerpb.WorkerStatus_WORKER_STATUS_ACTIVE
	ts := clock.NewRealTimeSource()
	self := membership.Host{ID: "a", HistoryAddress: "in-process"}
	b := startRemoteHost(t, "b", "127.0.0.1:0", watch.NewHub(watch.Options{TimeSource: ts}))
	var want []string
	for i := range 700 {
		key := fmt.Sprint("w-", i)
		publishTo(b.hub, worker.ChangeRegistered, key, fanState(active, "m1", 1, 0))
		want = append(want, "REGISTERED:"+key)
		if i == 0 {
			want = append(want, "HOST_ONLINE:m1")
		}
	}
	members := &fanMembers{self: self, members: []membership.Host{self, b.host}, subs: map[chan struct{}]struct{}{}}
	_, sub := newTestFanin(t, watch.NewHub(watch.Options{TimeSource: ts}), members)
	expectEvents(t, sub, want...)

	b.server.Stop()
	publishTo(b.hub, worker.ChangeHeartbeat, "w-1", fanState(active, "m1", 2, 0))
	b = startRemoteHost(t, "b", b.host.HistoryAddress, b.hub)
	expectEvents(t, sub, "HEARTBEAT:w-1")
	publishTo(b.hub, worker.ChangeHeartbeat, "w-2", fanState(active, "m1", 2, 0))
	expectEvents(t, sub, "HEARTBEAT:w-2") // nothing repeated in between
}

// TestWatchFaninHostComesBack: a host that drops out of the membership for a moment (a lapse)
// and comes back is followed on from where its feed was, without a resync; what it committed
// meanwhile arrives.
func TestWatchFaninHostComesBack(t *testing.T) {
	active := workerpb.WorkerStatus_WORKER_STATUS_ACTIVE
	ts := clock.NewRealTimeSource()
	self := membership.Host{ID: "a", HistoryAddress: "in-process"}
	b := startRemoteHost(t, "b", "127.0.0.1:0", watch.NewHub(watch.Options{TimeSource: ts}))
	members := &fanMembers{self: self, members: []membership.Host{self, b.host}, subs: map[chan struct{}]struct{}{}}
	f, sub := newTestFanin(t, watch.NewHub(watch.Options{TimeSource: ts}), members)
	publishTo(b.hub, worker.ChangeRegistered, "w-b", fanState(active, "m1", 1, 0))
	expectEvents(t, sub, "REGISTERED:w-b", "HOST_ONLINE:m1")

	for i := int64(2); i <= 4; i++ {
		members.set(self)
		require.Eventually(t, func() bool { // the feed saw it leave
			f.mu.Lock()
			defer f.mu.Unlock()
			feed := f.feeds["b"]
			return feed == nil || feed.hasLeft()
		}, time.Minute, time.Millisecond)
		publishTo(b.hub, worker.ChangeHeartbeat, "w-b", fanState(active, "m1", i, 0))
		members.set(self, b.host)
		expectEvents(t, sub, "HEARTBEAT:w-b")
		time.Sleep(50 * time.Millisecond) // past the grace: a feed that saw it leave would end now
	}
	// Still followed (the membership does not change again).
	publishTo(b.hub, worker.ChangeHeartbeat, "w-b", fanState(active, "m1", 5, 0))
	expectEvents(t, sub, "HEARTBEAT:w-b")
}
