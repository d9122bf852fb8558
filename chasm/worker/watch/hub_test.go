package watch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	workerv1 "go.temporal.io/api/worker/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/memrelease"
)

const ns = "ns-1"

func state(status workerpb.WorkerStatus, host string, hbTime time.Time) *workerpb.WorkerState {
	return &workerpb.WorkerState{
		ConflictToken:     hbTime.UnixNano(),
		Status:            status,
		LastHeartbeat:     &workerv1.WorkerHeartbeat{HostInfo: &workerv1.WorkerHostInfo{HostName: host}},
		LastHeartbeatTime: timestamppb.New(hbTime),
	}
}

func change(kind worker.ChangeKind, key string, s *workerpb.WorkerState) worker.Change {
	return worker.Change{Kind: kind, NamespaceID: ns, WorkerInstanceKey: key, State: s}
}

var (
	active   = workerpb.WorkerStatus_WORKER_STATUS_ACTIVE
	inactive = workerpb.WorkerStatus_WORKER_STATUS_INACTIVE
)

// drain returns what Next has without waiting (a cancelled context).
func drain(t *testing.T, s *Subscription) []Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	events, _, overflow, err := s.Next(ctx)
	require.False(t, overflow)
	if len(events) == 0 {
		require.ErrorIs(t, err, context.Canceled)
	}
	return events
}

func kinds(events []Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, fmt.Sprintf("%d:%s%s", e.Kind, e.WorkerInstanceKey, e.HostName))
	}
	return out
}

func TestHubOrderAndHosts(t *testing.T) {
	ts := clock.NewFakeTimeSource()
	h := NewHub(Options{TimeSource: ts})
	s, pos, ok := h.Subscribe(ns, 0, 0, 0)
	defer s.Close()
	require.True(t, ok)
	require.Zero(t, pos)

	h.Publish(change(worker.ChangeRegistered, "a", state(active, "m1", ts.Now())))
	h.Publish(change(worker.ChangeRegistered, "b", state(active, "m1", ts.Now())))
	h.Publish(change(worker.ChangeHeartbeat, "a", state(active, "m1", ts.Now())))
	h.Publish(change(worker.ChangeInactive, "a", state(inactive, "m1", ts.Now())))
	h.Publish(change(worker.ChangeInactive, "b", state(inactive, "m1", ts.Now())))
	// Another namespace's events are not this watcher's.
	h.Publish(worker.Change{Kind: worker.ChangeRegistered, NamespaceID: "other", WorkerInstanceKey: "z", State: state(active, "m9", ts.Now())})

	events := drain(t, s)
	require.Equal(t, []string{
		fmt.Sprintf("%d:am1", KindRegistered), fmt.Sprintf("%d:m1", KindHostOnline),
		fmt.Sprintf("%d:bm1", KindRegistered),
		fmt.Sprintf("%d:am1", KindHeartbeat),
		fmt.Sprintf("%d:am1", KindInactive), // b is still ACTIVE on m1: the host stays online
		fmt.Sprintf("%d:bm1", KindInactive), fmt.Sprintf("%d:m1", KindHostOffline),
	}, kinds(events))
	for i := 1; i < len(events); i++ {
		require.Equal(t, events[i-1].Seq+1, events[i].Seq, "no gap, no reordering")
	}
	require.Empty(t, h.HostsOnline(ns))
	require.Equal(t, []string{"m9"}, h.HostsOnline("other"))
}

// A worker that reports from another host moves from one host's count to the other's, and a
// namespace whose fleet has gone holds no bookkeeping.
func TestHubHostMovesAndFleetLeaves(t *testing.T) {
	ts := clock.NewFakeTimeSource()
	h := NewHub(Options{TimeSource: ts})
	s, _, _ := h.Subscribe(ns, 0, 0, 0)
	defer s.Close()

	h.Publish(change(worker.ChangeRegistered, "a", state(active, "m1", ts.Now())))
	h.Publish(change(worker.ChangeRegistered, "b", state(active, "m1", ts.Now())))
	h.Publish(change(worker.ChangeRegistered, "a", state(active, "m2", ts.Now()))) // a moved
	require.ElementsMatch(t, []string{"m1", "m2"}, h.HostsOnline(ns))
	h.Publish(change(worker.ChangeInactive, "b", state(inactive, "m1", ts.Now())))
	require.Equal(t, []string{"m2"}, h.HostsOnline(ns), "a left m1: its last worker was b")
	require.Equal(t, []string{
		fmt.Sprintf("%d:am1", KindRegistered), fmt.Sprintf("%d:m1", KindHostOnline),
		fmt.Sprintf("%d:bm1", KindRegistered),
		fmt.Sprintf("%d:am2", KindRegistered), fmt.Sprintf("%d:m2", KindHostOnline),
		fmt.Sprintf("%d:bm1", KindInactive), fmt.Sprintf("%d:m1", KindHostOffline),
	}, kinds(drain(t, s)))

	for i := range 2 * memrelease.ShrinkMapMin {
		h.Publish(change(worker.ChangeRegistered, fmt.Sprint("w", i), state(active, "m3", ts.Now())))
	}
	for i := range 2 * memrelease.ShrinkMapMin {
		h.Publish(change(worker.ChangeDeleted, fmt.Sprint("w", i), state(active, "m3", ts.Now())))
	}
	h.Publish(change(worker.ChangeInactive, "a", state(inactive, "m2", ts.Now())))
	require.Empty(t, h.HostsOnline(ns))
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(t, h.active, "no namespace entry is kept for a fleet that has gone")
}

func TestHubCoalescesHeartbeats(t *testing.T) {
	ts := clock.NewFakeTimeSource()
	h := NewHub(Options{TimeSource: ts})
	s, _, _ := h.Subscribe(ns, 0, 0, 5*time.Second)
	defer s.Close()

	h.Publish(change(worker.ChangeRegistered, "a", state(active, "m1", ts.Now())))
	require.Len(t, drain(t, s), 2) // REGISTERED, HOST_ONLINE

	first := ts.Now()
	h.Publish(change(worker.ChangeHeartbeat, "a", state(active, "m1", first)))
	got := drain(t, s)
	require.Len(t, got, 1, "the first heartbeat goes out at once")

	var last time.Time
	for i := 1; i <= 4; i++ {
		ts.Advance(time.Second)
		last = ts.Now()
		h.Publish(change(worker.ChangeHeartbeat, "a", state(active, "m1", last)))
		require.Empty(t, drain(t, s), "heartbeat %d within 5 s is held back", i)
	}
	// When the interval is over, the latest held-back heartbeat goes out, once.
	done := make(chan []Event)
	go func() {
		events, _, _, _ := s.Next(context.Background())
		done <- events
	}()
	ts.Advance(time.Second)
	events := <-done
	require.Len(t, events, 1)
	require.Equal(t, KindHeartbeat, events[0].Kind)
	require.Equal(t, last, events[0].State.GetLastHeartbeatTime().AsTime())
	require.Empty(t, drain(t, s))

	// A transition is never held back, and makes a held-back heartbeat moot.
	h.Publish(change(worker.ChangeHeartbeat, "a", state(active, "m1", ts.Now())))
	h.Publish(change(worker.ChangeInactive, "a", state(inactive, "m1", ts.Now())))
	require.Equal(t, []string{fmt.Sprintf("%d:am1", KindInactive), fmt.Sprintf("%d:m1", KindHostOffline)}, kinds(drain(t, s)))
	ts.Advance(time.Minute)
	require.Empty(t, drain(t, s))
}

func TestHubResumeByCursor(t *testing.T) {
	ts := clock.NewFakeTimeSource()
	h := NewHub(Options{TimeSource: ts, RingSize: 8})
	var published []*workerpb.WorkerState
	for i := range 5 {
		st := state(inactive, fmt.Sprint("host-", i), ts.Now())
		published = append(published, st)
		h.Publish(change(worker.ChangeDrainRequested, fmt.Sprint("w", i), st))
	}
	s, pos, ok := h.Subscribe(ns, h.Epoch(), 2, 0)
	require.True(t, ok)
	require.Equal(t, uint64(2), pos)
	events := drain(t, s)
	require.Equal(t, []uint64{3, 4, 5}, []uint64{events[0].Seq, events[1].Seq, events[2].Seq})
	for i, ev := range events {
		// The ring keeps states encoded: a resumed watcher gets each worker's whole state back.
		require.Equal(t, "w"+fmt.Sprint(i+2), ev.WorkerInstanceKey)
		require.Equal(t, "host-"+fmt.Sprint(i+2), ev.HostName)
		require.True(t, proto.Equal(published[i+2], ev.State), "replayed state of %s", ev.WorkerInstanceKey)
	}
	s.Close()

	// The cursor of a snapshot taken before the first event resumes from the first.
	s, _, ok = h.Subscribe(ns, h.Epoch(), 0, 0)
	require.True(t, ok)
	require.Len(t, drain(t, s), 5)
	s.Close()

	// Resuming at the head gives nothing, but resumes.
	s, _, ok = h.Subscribe(ns, h.Epoch(), 5, 0)
	require.True(t, ok)
	require.Empty(t, drain(t, s))
	s.Close()

	// Another epoch (a cursor of an earlier process) or a cursor from the future cannot resume.
	_, pos, ok = h.Subscribe(ns, h.Epoch()+1, 2, 0)
	require.False(t, ok)
	require.Equal(t, uint64(5), pos)
	_, _, ok = h.Subscribe(ns, h.Epoch(), 9, 0)
	require.False(t, ok)

	// Events the ring no longer holds: resync.
	for i := range 10 {
		h.Publish(change(worker.ChangeDrainRequested, fmt.Sprint("v", i), state(inactive, "", ts.Now())))
	}
	_, _, ok = h.Subscribe(ns, h.Epoch(), 2, 0)
	require.False(t, ok)
	s, _, ok = h.Subscribe(ns, h.Epoch(), 7, 0) // 8..15 are still held
	require.True(t, ok)
	require.Len(t, drain(t, s), 8)
}

func TestHubSlowWatcherResyncsWithBoundedMemory(t *testing.T) {
	ts := clock.NewFakeTimeSource()
	h := NewHub(Options{TimeSource: ts, BufferSize: 16})
	slow, _, _ := h.Subscribe(ns, 0, 0, 0)
	defer slow.Close()
	fast, _, _ := h.Subscribe(ns, 0, 0, 0)
	defer fast.Close()
	for i := range 1000 {
		h.Publish(change(worker.ChangeDrainRequested, fmt.Sprint("w", i), state(inactive, "", ts.Now())))
		if i%10 == 0 {
			require.NotEmpty(t, drain(t, fast))
		}
		h.mu.Lock()
		require.LessOrEqual(t, len(slow.buf), 16, "a watcher never holds more than its buffer")
		h.mu.Unlock()
	}
	_, _, overflow, err := slow.Next(context.Background())
	require.NoError(t, err)
	require.True(t, overflow, "the slow watcher is told to resync")
	events := drain(t, fast)
	require.NotEmpty(t, events)
	require.Equal(t, uint64(1000), events[len(events)-1].Seq, "the fast watcher lost nothing")
}

func TestChangesOfCommits(t *testing.T) {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	s0 := state(active, "m", base)
	s1 := state(active, "m", base.Add(time.Second))
	s2 := state(inactive, "m", base.Add(time.Second))
	s2.PendingReschedules = []*workerpb.PendingReschedule{{Epoch: 1, DestinationShard: 2, ActivityCount: 7}, {Epoch: 1, DestinationShard: 3, ActivityCount: 5}}
	s3 := state(inactive, "m", base.Add(time.Second))
	s3.PendingReschedules = s2.PendingReschedules[1:]
	s4 := state(active, "m", base.Add(2*time.Second))
	s4.DrainRequested = true
	s4.PendingReschedules = s3.PendingReschedules
	s5 := state(workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, "m", base)

	kindsOf := func(cs []worker.Change) []worker.ChangeKind {
		var out []worker.ChangeKind
		for _, c := range cs {
			out = append(out, c.Kind)
		}
		return out
	}
	k := chasmKey()
	require.Equal(t, []worker.ChangeKind{worker.ChangeRegistered}, kindsOf(worker.Changes(k, nil, s0, false)))
	require.Equal(t, []worker.ChangeKind{worker.ChangeHeartbeat}, kindsOf(worker.Changes(k, s0, s1, false)))
	require.Empty(t, worker.Changes(k, s1, s1, false), "a write that changes nothing visible reports nothing")
	require.Equal(t, []worker.ChangeKind{worker.ChangeInactive}, kindsOf(worker.Changes(k, s1, s2, false)))
	acked := worker.Changes(k, s2, s3, false)
	require.Equal(t, []worker.ChangeKind{worker.ChangeActivitiesRescheduled}, kindsOf(acked))
	require.Equal(t, int64(7), acked[0].Count)
	require.Equal(t, []worker.ChangeKind{worker.ChangeResurrected, worker.ChangeDrainRequested}, kindsOf(worker.Changes(k, s3, s4, false)))
	require.Equal(t, []worker.ChangeKind{worker.ChangeCleanedUp}, kindsOf(worker.Changes(k, s2, s5, false)))
	require.Equal(t, []worker.ChangeKind{worker.ChangeDeleted}, kindsOf(worker.Changes(k, s5, s5, true)))
}

func chasmKey() chasm.ExecutionKey { return chasm.ExecutionKey{NamespaceID: ns, BusinessID: "w"} }

func TestHubBusyWatcherHoldsOneHeartbeatPerWorker(t *testing.T) {
	ts := clock.NewFakeTimeSource()
	h := NewHub(Options{TimeSource: ts, BufferSize: 9})
	s, _, _ := h.Subscribe(ns, 0, 0, 0)
	defer s.Close()
	for _, key := range []string{"a", "b", "c"} {
		h.Publish(change(worker.ChangeRegistered, key, state(active, "m", ts.Now())))
	}
	for range 100 {
		ts.Advance(time.Millisecond)
		for _, key := range []string{"a", "b", "c"} {
			h.Publish(change(worker.ChangeHeartbeat, key, state(active, "m", ts.Now())))
		}
	}
	h.Publish(change(worker.ChangeDrainRequested, "a", state(active, "m", ts.Now())))
	ts.Advance(time.Millisecond)
	h.Publish(change(worker.ChangeHeartbeat, "a", state(active, "m", ts.Now())))

	events := drain(t, s)
	require.Equal(t, []string{
		fmt.Sprintf("%d:am", KindRegistered), fmt.Sprintf("%d:m", KindHostOnline),
		fmt.Sprintf("%d:bm", KindRegistered), fmt.Sprintf("%d:cm", KindRegistered),
		fmt.Sprintf("%d:am", KindHeartbeat), fmt.Sprintf("%d:bm", KindHeartbeat), fmt.Sprintf("%d:cm", KindHeartbeat),
		fmt.Sprintf("%d:am", KindDrainRequested),
		fmt.Sprintf("%d:am", KindHeartbeat), // after a transition: appended, never moved before it
	}, kinds(events), "300 heartbeats took 3 places in a buffer of 9")
	require.Equal(t, ts.Now().Add(-time.Millisecond), events[4].State.GetLastHeartbeatTime().AsTime(), "the latest heartbeat of a before its drain")
	require.Equal(t, ts.Now(), events[8].State.GetLastHeartbeatTime().AsTime())
}

// The ring lets go of events (and the worker states they hold) once they are older than
// RingRetention, also when no later event comes: a quiet host keeps nothing of a past burst.
// A cursor from before them can no longer resume; one that saw everything still can.
func TestHubRingForgetsOldEvents(t *testing.T) {
	ts := clock.NewFakeTimeSource()
	h := NewHub(Options{TimeSource: ts, RingRetention: time.Minute})
	for i := range 100 {
		h.Publish(change(worker.ChangeRegistered, fmt.Sprintf("w%d", i), state(active, "m1", ts.Now())))
	}
	held := func() int { return heldStates(h) }
	require.Equal(t, 100, held())
	s, _, resumed := h.Subscribe(ns, h.Epoch(), 50, 0)
	require.True(t, resumed, "within the retention a cursor resumes")
	s.Close()

	ts.Advance(time.Minute + time.Second)
	require.Eventually(t, func() bool { return held() == 0 }, 10*time.Second, time.Millisecond,
		"a minute later the ring holds no state")

	s, _, resumed = h.Subscribe(ns, h.Epoch(), 50, 0)
	require.False(t, resumed, "events since the cursor are gone: resync")
	s.Close()
	h.mu.Lock()
	last := h.seq
	h.mu.Unlock()
	s, pos, resumed := h.Subscribe(ns, h.Epoch(), last, 0)
	require.True(t, resumed, "a cursor that saw every event resumes")
	require.Equal(t, last, pos)
	s.Close()
}

// heldStates counts the events of h's ring that hold a worker's state.
func heldStates(h *Hub) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, ev := range h.ring {
		if ev.State != nil || ev.encoded != nil {
			n++
		}
	}
	return n
}

// A hub that nobody has watched for RingRetention keeps and encodes nothing: no cursor could
// resume from its events. Until then a watcher that left resumes, and a log followed from the
// hub's start has no gap; the next watcher starts the ring again. Hosts are tracked throughout.
func TestHubUnwatchedKeepsNothing(t *testing.T) {
	ts := clock.NewFakeTimeSource()
	h := NewHub(Options{TimeSource: ts, RingRetention: time.Minute})
	// Each change asks for its bytes as a commit's does, counting the asks: a heartbeat
	// answered from memory is encoded when asked.
	asked := 0
	publish := func(key string) {
		c := change(worker.ChangeHeartbeat, key, state(active, "m1", ts.Now()))
		c.Encoded = func() []byte {
			asked++
			b, err := proto.Marshal(c.State)
			require.NoError(t, err)
			return b
		}
		h.Publish(c)
	}

	publish("a")
	log, _, resumed := h.SubscribeLog(0, 0)
	require.True(t, resumed, "followed from its start, the log has no gap")
	require.Equal(t, []string{"2:am1"}, kinds(drain(t, log)))
	log.Close()

	ts.Advance(30 * time.Second)
	publish("b")
	s, _, resumed := h.Subscribe(ns, h.Epoch(), 1, 0)
	require.True(t, resumed, "left for less than RingRetention, a watcher resumes")
	require.Equal(t, []string{"2:bm1"}, kinds(drain(t, s)))
	s.Close()

	ts.Advance(time.Minute)
	publish("c") // finds the hub unwatched for RingRetention
	require.Zero(t, heldStates(h), "no state is kept for a ring nobody can read")
	before := asked
	publish("c")
	require.Equal(t, before, asked, "nor encoded")
	require.Equal(t, []string{"m1"}, h.HostsOnline(ns))
	s, _, resumed = h.Subscribe(ns, h.Epoch(), 2, 0)
	require.False(t, resumed, "the events since the cursor were not kept: resync")

	publish("d")
	require.Equal(t, before+1, asked, "a watcher starts the ring again")
	require.Equal(t, []string{"2:dm1"}, kinds(drain(t, s)))
	require.Equal(t, 1, heldStates(h))
	s.Close()
}
