package tests

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// clusterWatch records a WatchWorkers stream, reopening it with the last cursor when it
// breaks, as `vigil worker watch` does.
type clusterWatch struct {
	mu     sync.Mutex
	events []*livenesspb.WorkerEvent
}

func startClusterWatch(t *testing.T, client livenesspb.WorkerLivenessServiceClient, query string) *clusterWatch {
	w := &clusterWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		last := ""
		for ctx.Err() == nil {
			stream, err := client.WatchWorkers(ctx, &livenesspb.WatchWorkersRequest{Namespace: "default", Query: query, Cursor: last,
				HeartbeatEvery: durationpb.New(time.Millisecond)})
			for err == nil {
				var resp *livenesspb.WatchWorkersResponse
				if resp, err = stream.Recv(); err == nil {
					last = resp.GetEvent().GetCursor()
					w.mu.Lock()
					w.events = append(w.events, resp.GetEvent())
					w.mu.Unlock()
				}
			}
			if ctx.Err() == nil {
				t.Logf("watch stream broken (%v); reopening after cursor %q", err, last)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	return w
}

// waitFor waits for an event at or after index from that is of type typ and names key (a
// worker, or a host for host events); it returns its index.
func (w *clusterWatch) waitFor(t *testing.T, from int, typ livenesspb.WorkerEventType, key string) int {
	t.Helper()
	found := -1
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for i := from; i < len(w.events); i++ {
			ev := w.events[i]
			if ev.GetType() == typ && (key == "" || ev.GetWorker().GetWorkerInstanceKey() == key || ev.GetHostName() == key) {
				found = i
				return true
			}
		}
		return false
	}, 90*time.Second, 20*time.Millisecond, "no %s %s after event %d", typ, key, from)
	return found
}

// of returns the types of the events in [from, to) that name key (a worker or a host); with
// key "", the reasons of the RESYNC events.
func (w *clusterWatch) of(from, to int, key string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, ev := range w.events[from:to] {
		if key == "" {
			if ev.GetType() == livenesspb.WorkerEventType_WORKER_EVENT_TYPE_RESYNC {
				out = append(out, ev.GetReason())
			}
			continue
		}
		if ev.GetWorker().GetWorkerInstanceKey() == key || (ev.GetWorker() == nil && ev.GetHostName() == key) {
			out = append(out, strings.TrimPrefix(ev.GetType().String(), "WORKER_EVENT_TYPE_"))
		}
	}
	return out
}

// dump lists every event of key, for a failure message.
func (w *clusterWatch) dump(key string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for i, ev := range w.events {
		if ev.GetWorker().GetWorkerInstanceKey() == key || ev.GetType() == livenesspb.WorkerEventType_WORKER_EVENT_TYPE_RESYNC {
			fmt.Fprintf(&b, "%d %s cursor=%s time=%s token=%d\n", i, ev.GetType(), ev.GetCursor(), ev.GetTime().AsTime().Format("15:04:05.000000"), ev.GetWorker().GetConflictToken())
		}
	}
	return b.String()
}

func (w *clusterWatch) event(i int) *livenesspb.WorkerEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.events[i]
}

// TestWatchClusterFanIn: three hosts on one PostgreSQL; a watcher connected to host 1 sees,
// in order, the changes of workers whose shards are host 2's and host 3's; the machine the
// workers run on is online while any of them is ACTIVE on any host. When host 2 stops
// gracefully, its worker's changes go on from the shard's next owner without a resync. When
// host 3 crashes, the watcher is told to resync (host 3's last events may be lost with it),
// gets a fresh snapshot, and then the changes that the shard's new owner commits.
func TestWatchClusterFanIn(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	hosts := testcluster.NewHosts(t, 3, testcluster.Options{NumShards: clusterShards})
	owners := testcluster.Owners(hosts...)
	nsID := namespace.DeriveID("default")
	keyOn := func(host, prefix string) string {
		return testcluster.KeyOwnedBy(t, owners, host, prefix, nsID, clusterShards)
	}
	onHost2, onHost3 := keyOn("host-2", "watched-a"), keyOn("host-3", "watched-b")
	const machine = "machine-1"

	conn, err := grpc.NewClient(hosts[0].Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	wf := workflowservice.NewWorkflowServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	beat := func(key string) error {
		_, err := wf.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{Namespace: "default",
			WorkerHeartbeat: []*workerv1.WorkerHeartbeat{{WorkerInstanceKey: key, WorkerIdentity: key, TaskQueue: "watch-fanin",
				HostInfo: &workerv1.WorkerHostInfo{HostName: machine}}}})
		return err
	}
	shutdown := func(key string) {
		_, err := wf.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: "default", WorkerInstanceKey: key})
		require.NoError(t, err)
	}

	w := startClusterWatch(t, livenesspb.NewWorkerLivenessServiceClient(conn), `TaskQueue = "watch-fanin"`)
	start := w.waitFor(t, 0, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT_END, "")

	// A worker of host 2's shards, watched through host 1.
	require.NoError(t, beat(onHost2))
	w.waitFor(t, start, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_HOST_ONLINE, machine)
	require.NoError(t, beat(onHost2))
	beaten := time.Now()
	i := w.waitFor(t, start, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_HEARTBEAT, onHost2)
	t.Logf("host 2's heartbeat seen by the watcher on host 1 %v after it was acknowledged (polled every 20 ms; 2-core box shared)",
		time.Since(beaten).Round(time.Millisecond))
	// A second worker on the same machine, of host 3's shards.
	require.NoError(t, beat(onHost3))
	i = w.waitFor(t, i, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_REGISTERED, onHost3)
	shutdown(onHost2)
	inactive := w.waitFor(t, i, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_INACTIVE, onHost2)
	require.Equal(t, livenesspb.InactiveReason_INACTIVE_REASON_SHUTDOWN, w.event(inactive).GetInactiveReason())
	require.NoError(t, beat(onHost3))
	i = w.waitFor(t, inactive, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_HEARTBEAT, onHost3)
	require.Equal(t, []string{"REGISTERED", "HEARTBEAT", "INACTIVE"}, w.of(start, i, onHost2), "host 2's worker, in commit order")
	require.Equal(t, []string{"HOST_ONLINE"}, w.of(start, i, machine),
		"the machine stays online: its worker on host 3's shard is ACTIVE")

	// keepBeating heartbeats key through host 1 until the returned function is called.
	keepBeating := func(key string) func() {
		beating, stopBeating := context.WithCancel(ctx)
		beaten := make(chan struct{})
		go func() {
			defer close(beaten)
			for beating.Err() == nil {
				_ = beat(key) // fails while the shard has no owner
				select {
				case <-beating.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
		return func() { stopBeating(); <-beaten }
	}

	// Host 2 stops gracefully while a worker of its shards heartbeats: it sends every change
	// before it goes, the shard's next owner reports the next ones, and the watcher needs no
	// resync.
	onHost2b := keyOn("host-2", "watched-c")
	require.NoError(t, beat(onHost2b))
	moved := w.waitFor(t, i, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_REGISTERED, onHost2b)
	stop := keepBeating(onHost2b)
	hosts[1].Stop()
	testcluster.WaitForOwnership(t, hosts[0], hosts[2])
	stop()
	shutdown(onHost2b)
	i = w.waitFor(t, moved, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_INACTIVE, onHost2b)
	seq := w.of(moved, i+1, onHost2b)
	require.Equal(t, "REGISTERED", seq[0])
	require.Equal(t, "INACTIVE", seq[len(seq)-1])
	for _, typ := range seq[1 : len(seq)-1] {
		require.Equal(t, "HEARTBEAT", typ, "%v\n%s", seq, w.dump(onHost2b))
	}
	requireForward(t, w, onHost2b, moved, i+1)
	require.Empty(t, w.of(start, i+1, ""), "no RESYNC: a graceful stop loses nothing")

	// Host 3 crashes while its worker keeps heartbeating (through host 1).
	stop = keepBeating(onHost3)
	hosts[2].Crash()
	testcluster.WaitForOwnership(t, hosts[0])
	resync := w.waitFor(t, i, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_RESYNC, "")
	require.Contains(t, w.event(resync).GetReason(), "host-3")
	// A fresh snapshot (after a reopened stream if the first snapshot met the takeover)…
	end := w.waitFor(t, resync, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT_END, "")
	// …then the heartbeats the new owner records, and the shutdown.
	w.waitFor(t, end, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_HEARTBEAT, onHost3)
	stop()
	shutdown(onHost3)
	last := w.waitFor(t, end, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_INACTIVE, onHost3)
	offline := w.waitFor(t, last, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_HOST_OFFLINE, machine)
	require.Equal(t, last+1, offline, "the machine goes offline with its last ACTIVE worker")

	// Host 3's worker never went back, before and after the resync, and the last snapshot
	// showed it ACTIVE.
	requireForward(t, w, onHost3, start, resync)
	snapshot := requireForward(t, w, onHost3, resync, last+1)
	require.NotNil(t, snapshot, "the snapshot after the resync shows host 3's worker")
	require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_ACTIVE, snapshot.GetWorker().GetState())
}

// requireForward checks that the events of worker key in [from, to) never go back (each
// heartbeat counts up the conflict token); it returns the last SNAPSHOT of the worker.
func requireForward(t *testing.T, w *clusterWatch, key string, from, to int) (snapshot *livenesspb.WorkerEvent) {
	t.Helper()
	var token int64
	for j := from; j < to; j++ {
		ev := w.event(j)
		if ev.GetWorker().GetWorkerInstanceKey() != key {
			continue
		}
		if ev.GetType() == livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT {
			snapshot = ev
		}
		require.GreaterOrEqual(t, ev.GetWorker().GetConflictToken(), token, "event %d (%s) went back", j, ev.GetType())
		token = ev.GetWorker().GetConflictToken()
	}
	return snapshot
}
