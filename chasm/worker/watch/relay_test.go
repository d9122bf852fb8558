package watch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/memrelease"
)

// counted is a state of a worker on machine host after hb heartbeats and lapses lapses.
func counted(status workerpb.WorkerStatus, host string, hb, lapses int64) *workerpb.WorkerState {
	s := state(status, host, time.Unix(hb, 0))
	s.HeartbeatCount, s.InactiveEpoch = hb, lapses
	return s
}

func relayed(kind Kind, key string, s *workerpb.WorkerState) Event {
	return Event{Kind: kind, NamespaceID: ns, WorkerInstanceKey: key, HostName: "ignored", State: s}
}

// TestRelayHostsOverTheCluster: a frontend's hub relays two history hosts' logs; a machine
// whose workers live on shards of both hosts stays online until its last worker anywhere goes
// INACTIVE, and the history hosts' own host events are not repeated.
func TestRelayHostsOverTheCluster(t *testing.T) {
	h := NewHub(Options{TimeSource: clock.NewFakeTimeSource()})
	s, _, _ := h.Subscribe(ns, 0, 0, 0)
	h.Relay(relayed(KindRegistered, "w-1", counted(active, "m1", 1, 0)))   // from history host A
	h.Relay(Event{Kind: KindHostOnline, NamespaceID: ns, HostName: "m1"})  // A's own view: dropped
	h.Relay(relayed(KindRegistered, "w-2", counted(active, "m1", 1, 0)))   // from history host B
	h.Relay(relayed(KindInactive, "w-1", counted(inactive, "m1", 1, 1)))   // A: m1 still has w-2 on B
	h.Relay(Event{Kind: KindHostOffline, NamespaceID: ns, HostName: "m1"}) // A's own view: dropped
	h.Relay(relayed(KindInactive, "w-2", counted(inactive, "m1", 1, 1)))   // B: the last one
	require.Equal(t, []string{"1:w-1m1", "100:m1", "1:w-2m1", "3:w-1m1", "3:w-2m1", "101:m1"}, kinds(drain(t, s)))
	require.Empty(t, h.HostsOnline(ns))
}

// TestRelayDropsLateEvents: a worker's shard moved from host A to host B while A's stream
// lagged; A's last events arrive after B's and are dropped, so the worker never goes back.
func TestRelayDropsLateEvents(t *testing.T) {
	h := NewHub(Options{TimeSource: clock.NewFakeTimeSource()})
	s, _, _ := h.Subscribe(ns, 0, 0, 0)
	h.Relay(relayed(KindHeartbeat, "w-1", counted(active, "m1", 4, 0)))        // A
	h.Relay(relayed(KindInactive, "w-1", counted(inactive, "m1", 5, 1)))       // B, after the move
	h.Relay(relayed(KindHeartbeat, "w-1", counted(active, "m1", 5, 0)))        // A, late: dropped
	h.Relay(relayed(KindDrainRequested, "w-1", counted(inactive, "m1", 5, 1))) // same progress: kept
	h.Relay(relayed(KindResurrected, "w-1", counted(active, "m1", 6, 1)))      // B
	h.Relay(relayed(KindDeleted, "w-1", counted(inactive, "m1", 6, 1)))        // forgotten after (m1 offline)
	h.Relay(relayed(KindRegistered, "w-1", counted(active, "m1", 1, 0)))       // a new worker under the key
	require.Equal(t, []string{"2:w-1m1", "3:w-1m1", "101:m1", "7:w-1m1", "4:w-1m1", "100:m1", "6:w-1m1", "101:m1", "1:w-1m1", "100:m1"}, kinds(drain(t, s)))

	require.True(t, Older(counted(active, "", 3, 0), counted(active, "", 4, 0)))
	require.True(t, Older(counted(inactive, "", 4, 1), counted(active, "", 4, 2)))
	require.True(t, Older(counted(inactive, "", 4, 1), counted(workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, "", 4, 1)))
	require.False(t, Older(counted(active, "", 4, 1), counted(active, "", 4, 1)))
}

// TestGapResyncsWatchers: a gap makes every watcher resync with its reason, and no cursor
// from before it resumes; one from after it does.
func TestGapResyncsWatchers(t *testing.T) {
	h := NewHub(Options{TimeSource: clock.NewFakeTimeSource()})
	s, _, _ := h.Subscribe(ns, 0, 0, 0)
	h.Relay(relayed(KindRegistered, "w-1", counted(active, "m1", 1, 0)))
	require.Len(t, drain(t, s), 2) // with m1 online
	h.Gap("host B crashed")
	_, _, overflow, err := s.Next(context.Background())
	require.NoError(t, err)
	require.True(t, overflow)
	require.Equal(t, "host B crashed", s.ResyncReason())
	require.Empty(t, h.HostsOnline(ns), "the host bookkeeping starts over")

	_, _, ok := h.Subscribe(ns, h.Epoch(), 2, 0)
	require.False(t, ok, "cursor from before the gap")
	after, pos, ok := h.Subscribe(ns, h.Epoch(), 3, 0)
	require.True(t, ok, "cursor of the gap itself: nothing after it was lost")
	require.EqualValues(t, 3, pos)
	// A worker ACTIVE before the gap is learned from its next heartbeat, without a new HOST_ONLINE.
	h.Relay(relayed(KindHeartbeat, "w-1", counted(active, "m1", 2, 0)))
	require.Equal(t, []string{"2:w-1m1"}, kinds(drain(t, after)))
	require.Equal(t, []string{"m1"}, h.HostsOnline(ns))
}

// TestSubscribeLog: the relay subscription of a history host's log resumes from a cursor it
// still holds, starts from the first event for epoch 0, and says when it skipped events.
func TestSubscribeLog(t *testing.T) {
	h := NewHub(Options{TimeSource: clock.NewFakeTimeSource(), RingSize: 8, BufferSize: 8})
	for i := range 3 { // heartbeats of different workers (a worker's replace each other in a buffer)
		h.Publish(change(2, fmt.Sprint("w-", i), counted(active, "m1", 1, 0)))
	}
	s, pos, ok := h.SubscribeLog(0, 0)
	require.True(t, ok)
	require.Zero(t, pos)
	require.Len(t, drain(t, s), 3, "every namespace, from the first event")
	s.Close()

	s, pos, ok = h.SubscribeLog(h.Epoch(), 2)
	require.True(t, ok)
	require.EqualValues(t, 2, pos)
	require.Len(t, drain(t, s), 1)
	s.Close()

	s, _, ok = h.SubscribeLog(h.Epoch()+1, 2)
	require.False(t, ok, "another process's cursor")
	require.Len(t, drain(t, s), 3, "the new process's log is sent whole")
	s.Close()

	for i := range 6 {
		h.Publish(change(2, fmt.Sprint("v-", i), counted(active, "m1", 1, 0)))
	}
	s, pos, ok = h.SubscribeLog(0, 0)
	require.False(t, ok, "the log no longer starts at its first event")
	require.EqualValues(t, 5, pos, "at most half a buffer is replayed")
	require.Len(t, drain(t, s), 4)
}

// TestRelayForgetsOldEvents: a frontend's hub, fed only by Relay, lets go of the relayed
// events (and the worker states they hold) after RingRetention as a history host's does, and
// its map of a namespace's relayed workers is made anew once most of the fleet is deleted, and
// dropped with the last of it.
func TestRelayForgetsOldEvents(t *testing.T) {
	ts := clock.NewFakeTimeSource()
	h := NewHub(Options{TimeSource: ts, RingRetention: time.Minute})
	const workers = 2000
	at := func(ev Event) Event { ev.Time = ts.Now(); return ev }
	for i := range workers {
		h.Relay(at(relayed(KindRegistered, fmt.Sprintf("w%d", i), counted(active, "m1", 1, 0))))
	}
	for i := range workers - 1 {
		h.Relay(at(relayed(KindDeleted, fmt.Sprintf("w%d", i), counted(inactive, "m1", 1, 1))))
	}
	h.mu.Lock()
	require.Len(t, h.relayed[ns].byKey, 1)
	require.Less(t, h.relayed[ns].peak, memrelease.ShrinkMapMin, "the map was made anew for what it holds")
	h.mu.Unlock()
	h.Relay(at(relayed(KindDeleted, fmt.Sprintf("w%d", workers-1), counted(inactive, "m1", 1, 1))))
	held := func() int { return heldStates(h) }
	require.Equal(t, 2*workers, held())
	h.mu.Lock()
	require.Empty(t, h.relayed, "the namespace went with its last worker")
	h.mu.Unlock()

	ts.Advance(time.Minute + time.Second)
	require.Eventually(t, func() bool { return held() == 0 }, 10*time.Second, time.Millisecond,
		"a minute later the ring holds no state")
}
