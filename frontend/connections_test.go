package frontend

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/frontend/namespace"
)

// fakeReporter records what reached "history", in order, and can fail calls.
type fakeReporter struct {
	mu      sync.Mutex
	reports []*workerpb.ConnectionReport
	failN   int
}

func (f *fakeReporter) ShardFor(_, key string) int32 { return int32(len(key) % 3) }

func (f *fakeReporter) ReportConnections(_ context.Context, req *workerpb.ReportConnectionsRequest) (*workerpb.ReportConnectionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failN > 0 {
		f.failN--
		return nil, errors.New("shard unavailable")
	}
	resp := &workerpb.ReportConnectionsResponse{}
	for _, r := range req.GetReports() {
		f.reports = append(f.reports, r)
		resp.Errors = append(resp.Errors, &workerpb.EntryError{})
	}
	return resp, nil
}

// got returns "lost:key" / "seen:key" for every report so far.
func (f *fakeReporter) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.reports {
		kind := "seen:"
		if r.GetLost() {
			kind = "lost:"
		}
		out = append(out, kind+r.GetWorkerInstanceKey())
	}
	return out
}

type trackerHarness struct {
	t       *testing.T
	tracker *connTracker
	fake    *fakeReporter
}

func newTrackerHarness(t *testing.T) *trackerHarness {
	fake := &fakeReporter{}
	tr := newConnTracker(fake, namespace.MustNewRegistry(), zaptest.NewLogger(t))
	t.Cleanup(tr.stop)
	return &trackerHarness{t: t, tracker: tr, fake: fake}
}

func (h *trackerHarness) conn() context.Context {
	return h.tracker.TagConn(context.Background(), &stats.ConnTagInfo{})
}

func (h *trackerHarness) end(conn context.Context) { h.tracker.HandleConn(conn, &stats.ConnEnd{}) }

func (h *trackerHarness) call(conn context.Context, req any) {
	_, err := h.tracker.intercept(conn, req, &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) { return nil, nil })
	require.NoError(h.t, err)
}

func (h *trackerHarness) poll(conn context.Context, key string) {
	h.call(conn, &workflowservice.PollActivityTaskQueueRequest{Namespace: "default", WorkerInstanceKey: key})
}

// eventually waits for the reports want ("seen:KEY", "lost:KEY"). Each worker's reports come
// in order; the reports of different workers may interleave in any order (they are batched per
// shard).
func (h *trackerHarness) eventually(want ...string) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return len(h.fake.got()) >= len(want) }, 10*time.Second, time.Millisecond)
	require.Equal(h.t, perWorker(want), perWorker(h.fake.got()))
}

// perWorker groups reports by worker key, in their order.
func perWorker(reports []string) map[string][]string {
	out := map[string][]string{}
	for _, r := range reports {
		_, key, _ := strings.Cut(r, ":")
		out[key] = append(out[key], r)
	}
	return out
}

func TestConnTracker(t *testing.T) {
	t.Parallel()

	t.Run("LastConnectionClosingReportsTheWorkersLost", func(t *testing.T) {
		t.Parallel()
		h := newTrackerHarness(t)
		c1 := h.conn()
		h.poll(c1, "w1")
		h.eventually("seen:w1") // new on this host: may clear a suspicion raised elsewhere
		h.poll(c1, "w1")        // known on this connection: nothing
		h.end(c1)
		h.eventually("seen:w1", "lost:w1")
		require.Zero(t, h.tracker.trackedWorkers())
	})

	t.Run("AnotherLiveConnectionKeepsTheWorker", func(t *testing.T) {
		t.Parallel()
		h := newTrackerHarness(t)
		c1, c2 := h.conn(), h.conn()
		h.poll(c1, "w1")
		h.eventually("seen:w1")
		h.poll(c2, "w1") // a GOAWAY: the SDK moved to a new connection first
		h.end(c1)
		time.Sleep(50 * time.Millisecond)
		require.Equal(t, []string{"seen:w1"}, h.fake.got())
		h.end(c2)
		h.eventually("seen:w1", "lost:w1")
	})

	t.Run("EveryWorkerOfASharedConnectionAndHeartbeatsCount", func(t *testing.T) {
		t.Parallel()
		h := newTrackerHarness(t)
		c1 := h.conn()
		h.call(c1, &workflowservice.RecordWorkerHeartbeatRequest{Namespace: "default", WorkerHeartbeat: []*workerv1.WorkerHeartbeat{
			{WorkerInstanceKey: "w1"}, {WorkerInstanceKey: "w2"},
			{WorkerInstanceKey: "w3", Status: enumspb.WORKER_STATUS_SHUTTING_DOWN},
		}})
		require.Eventually(t, func() bool { return len(h.fake.got()) == 2 }, 10*time.Second, time.Millisecond)
		h.end(c1)
		require.Eventually(t, func() bool { return len(h.fake.got()) == 4 }, 10*time.Second, time.Millisecond)
		require.ElementsMatch(t, []string{"seen:w1", "seen:w2", "lost:w1", "lost:w2"}, h.fake.got())
	})

	t.Run("ShutdownWorkerIsNotALoss", func(t *testing.T) {
		t.Parallel()
		h := newTrackerHarness(t)
		c1 := h.conn()
		h.poll(c1, "w1")
		h.poll(c1, "w2")
		h.eventually("seen:w1", "seen:w2")
		h.call(c1, &workflowservice.ShutdownWorkerRequest{Namespace: "default", WorkerInstanceKey: "w1"})
		h.end(c1)
		h.eventually("seen:w1", "seen:w2", "lost:w2")
	})

	t.Run("ReconnectAfterALossClearsIt", func(t *testing.T) {
		t.Parallel()
		h := newTrackerHarness(t)
		c1 := h.conn()
		h.poll(c1, "w1")
		h.eventually("seen:w1")
		h.end(c1)
		h.eventually("seen:w1", "lost:w1")
		h.poll(h.conn(), "w1")
		h.eventually("seen:w1", "lost:w1", "seen:w1")
	})

	t.Run("FailedReportsAreRetriedInOrder", func(t *testing.T) {
		t.Parallel()
		h := newTrackerHarness(t)
		h.fake.failN = 2
		c1 := h.conn()
		h.poll(c1, "w1")
		h.eventually("seen:w1")
		h.fake.mu.Lock()
		h.fake.failN = 1
		h.fake.mu.Unlock()
		h.end(c1)
		h.eventually("seen:w1", "lost:w1")
	})

	t.Run("UnknownNamespacesAndEmptyKeysAreNotTracked", func(t *testing.T) {
		t.Parallel()
		h := newTrackerHarness(t)
		c1 := h.conn()
		h.call(c1, &workflowservice.PollActivityTaskQueueRequest{Namespace: "nope", WorkerInstanceKey: "w1"})
		h.poll(c1, "")
		h.call(c1, &workflowservice.PollNexusTaskQueueRequest{Namespace: "default"})
		require.Zero(t, h.tracker.trackedWorkers())
	})

	t.Run("AStoppingServerReportsNothing", func(t *testing.T) {
		t.Parallel()
		h := newTrackerHarness(t)
		c1 := h.conn()
		h.poll(c1, "w1")
		h.eventually("seen:w1")
		h.tracker.stop()
		h.end(c1)
		time.Sleep(50 * time.Millisecond)
		require.Equal(t, []string{"seen:w1"}, h.fake.got())
	})

	t.Run("BoundedPerConnection", func(t *testing.T) {
		t.Parallel()
		h := newTrackerHarness(t)
		c1 := h.conn()
		for i := range maxWorkersPerConn + 10 {
			h.poll(c1, string(rune('a'+i%26))+time.Duration(i).String())
		}
		require.Equal(t, maxWorkersPerConn, h.tracker.trackedWorkers())
	})
}
