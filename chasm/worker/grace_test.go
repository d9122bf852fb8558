package worker_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/history/historytest"
)

// restartable is a history host over one SQLite file that a test stops and starts again, on
// a fake clock.
type restartable struct {
	t        *testing.T
	ts       *clock.FakeTimeSource
	dcClient *dynamicconfig.MemoryClient
	config   *worker.Config
	lib      *worker.Library
	path     string
	logger   *zap.Logger
}

func newRestartable(t *testing.T) *restartable {
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	dcClient := dynamicconfig.NewMemoryClient()
	config := worker.NewConfig(dynamicconfig.NewCollection(dcClient, logger), hostNumShards)
	return &restartable{t: t, ts: clock.NewFakeTimeSource(), dcClient: dcClient, config: config, logger: logger,
		lib: worker.NewLibrary(config, worker.NotFoundRescheduler{}, tally.NoopScope, logger), path: filepath.Join(t.TempDir(), "vigil.db")}
}

// start starts the host on the file, with a handler.
func (r *restartable) start() (*historytest.Host, *worker.Handler) {
	h := historytest.Start(r.t, historytest.Options{
		Path: r.path, NumShards: hostNumShards, Libraries: []chasm.Library{r.lib},
		DynamicConfig: r.dcClient, TimeSource: r.ts, Logger: r.logger,
	})
	return h, worker.NewHandler(h.Engine, r.config, r.ts, tally.NoopScope, r.logger)
}

// state reads worker key's state on h.
func (r *restartable) state(h *historytest.Host, key string) *workerpb.WorkerState {
	ref, err := chasm.NewRef[*worker.Worker](h.Engine, chasm.ExecutionKey{NamespaceID: "ns-id", BusinessID: key})
	require.NoError(r.t, err)
	s, err := chasm.ReadComponent(context.Background(), h.Engine, ref, func(_ chasm.Context, w *worker.Worker) (*workerpb.WorkerState, error) {
		return w.WorkerState, nil
	})
	require.NoError(r.t, err)
	return s
}

// TestLeaseGraceAfterRestart: leases that ran out while the server was down are not declared
// dead the moment it comes back. A worker that heartbeats within the grace keeps its work; one
// that stays silent is declared INACTIVE once the grace has passed.
func TestLeaseGraceAfterRestart(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	r.dcClient.OverrideValue(dynamicconfig.LeaseExpiryGraceAfterRestart.Key(), "30s")
	ts, start := r.ts, r.start
	beat := func(h *worker.Handler, key string) {
		resp, err := h.RecordHeartbeats(context.Background(), &workerpb.RecordHeartbeatsRequest{
			NamespaceId: "ns-id", Namespace: "ns",
			Heartbeats: []*workerpb.HeartbeatEntry{{Heartbeat: heartbeat(key)}},
		})
		require.NoError(t, err)
		require.Nil(t, resp.Results[0].Error)
	}
	status := func(h *historytest.Host, key string) workerpb.WorkerStatus { return r.state(h, key).Status }

	host, handler := start()
	beat(handler, "w-alive")
	beat(handler, "w-dead")
	host.Stop()

	ts.Advance(5 * time.Minute) // the outage: both 30s leases run out
	host, handler = start()
	require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, status(host, "w-alive"))
	require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, status(host, "w-dead"))

	ts.Advance(10 * time.Second)
	beat(handler, "w-alive") // reconnects within the grace
	ts.Advance(25 * time.Second)
	require.Eventually(t, func() bool {
		return status(host, "w-dead") == workerpb.WorkerStatus_WORKER_STATUS_INACTIVE
	}, 10*time.Second, 5*time.Millisecond, "the silent worker is declared dead once the grace is over")
	alive := r.state(host, "w-alive")
	require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, alive.Status)
	require.Zero(t, alive.InactiveEpoch, "the reconnected worker was never declared dead")
}

// TestSuspicionSurvivesARestart: a suspicion is durable. After a restart the suspect worker is
// still suspect, its expiry gets the restart grace like a lease's, and it ends CONNECTION_LOST
// unless it is seen again; a worker that was not suspect is not made one.
func TestSuspicionSurvivesARestart(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	r.dcClient.OverrideValue(dynamicconfig.LeaseExpiryGraceAfterRestart.Key(), "5s")
	r.dcClient.OverrideValue(worker.SuspectGracePeriod.Key(), "1s")
	ts, start, state := r.ts, r.start, r.state
	host, handler := start()
	for _, key := range []string{"w-dead", "w-healthy"} {
		resp, err := handler.RecordHeartbeats(context.Background(), &workerpb.RecordHeartbeatsRequest{
			NamespaceId: "ns-id", Namespace: "ns",
			Heartbeats: []*workerpb.HeartbeatEntry{{Heartbeat: heartbeat(key), LeaseDuration: durationpb.New(time.Hour)}},
		})
		require.NoError(t, err)
		require.Nil(t, resp.Results[0].Error)
	}
	_, err := handler.ReportConnections(context.Background(), &workerpb.ReportConnectionsRequest{Reports: []*workerpb.ConnectionReport{
		{NamespaceId: "ns-id", Namespace: "ns", WorkerInstanceKey: "w-dead", Lost: true},
	}})
	require.NoError(t, err)
	host.Stop() // before the grace ran out

	ts.Advance(10 * time.Second) // the outage
	host, _ = start()
	dead := state(host, "w-dead")
	require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, dead.Status, "the restart grace first")
	require.NotNil(t, dead.SuspectSince, "the suspicion survived the restart")
	require.Nil(t, state(host, "w-healthy").SuspectSince, "none was invented")

	ts.Advance(6 * time.Second)
	require.Eventually(t, func() bool {
		return state(host, "w-dead").Status == workerpb.WorkerStatus_WORKER_STATUS_INACTIVE
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST, state(host, "w-dead").InactiveReason)
	require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, state(host, "w-healthy").Status)
}

// TestUnwrittenHeartbeatsAfterARestart: heartbeats answered from memory are lost with the host,
// but the leases they granted are not. After a restart (a clean one: no restart grace), a worker
// whose last heartbeats were not written keeps its lease until the bound its last written
// heartbeat set, and only a worker still silent then is declared dead.
func TestUnwrittenHeartbeatsAfterARestart(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	r.dcClient.OverrideValue(dynamicconfig.LeaseExpiryGraceAfterRestart.Key(), "0s")
	r.dcClient.OverrideValue(worker.HeartbeatWriteInterval.Key(), "10s")
	ts, start := r.ts, r.start
	beat := func(h *worker.Handler, key string) *workerpb.HeartbeatResult {
		resp, err := h.RecordHeartbeats(context.Background(), &workerpb.RecordHeartbeatsRequest{
			NamespaceId: "ns-id", Namespace: "ns",
			Heartbeats: []*workerpb.HeartbeatEntry{{Heartbeat: heartbeat(key), LeaseDuration: durationpb.New(3 * time.Second)}},
		})
		require.NoError(t, err)
		require.Nil(t, resp.Results[0].Error)
		return resp.Results[0]
	}
	host, handler := start()
	t0 := ts.Now()
	beat(handler, "w-1") // written: deadline t0+3s, bound t0+13s
	var acked *workerpb.HeartbeatResult
	for range 5 {
		ts.Advance(time.Second)
		acked = beat(handler, "w-1") // answered from memory
	}
	require.Equal(t, t0.Add(8*time.Second), acked.LeaseDeadline.AsTime())
	host.Stop()

	host, _ = start() // at t0+5s: the store has the deadline t0+3s, already past
	deferred := func() (n int64) {
		for _, c := range host.Scope.(tally.TestScope).Snapshot().Counters() {
			if strings.HasSuffix(c.Name(), "timer_tasks_deferred") {
				n += c.Value()
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return deferred() > 0 }, 10*time.Second, 5*time.Millisecond,
		"the expiry timer stored at t0+3s fires and waits")
	require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, r.state(host, "w-1").Status, "a granted lease is kept")

	ts.Advance(5 * time.Second) // t0+10s: past the acknowledged deadline, within the bound
	require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, r.state(host, "w-1").Status)
	ts.Advance(3 * time.Second) // t0+13s: the bound
	require.Eventually(t, func() bool {
		return r.state(host, "w-1").Status == workerpb.WorkerStatus_WORKER_STATUS_INACTIVE
	}, 10*time.Second, 5*time.Millisecond, "the silent worker is declared dead at the bound")
}

// TestAnExpiryTimerRunsOnlyOnceTheLeaseRunsOut: heartbeats that renew a lease and leave the
// expiry timer where it is hold it in the host's memory until the new deadline, so a live
// worker's timer never runs, and a worker that stops beating is declared dead at its last
// deadline, by one run of the timer.
func TestAnExpiryTimerRunsOnlyOnceTheLeaseRunsOut(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	r.dcClient.OverrideValue(worker.HeartbeatWriteInterval.Key(), "10s")
	ts := r.ts
	host, handler := r.start()
	beat := func() *workerpb.HeartbeatResult {
		resp, err := handler.RecordHeartbeats(context.Background(), &workerpb.RecordHeartbeatsRequest{
			NamespaceId: "ns-id", Namespace: "ns",
			Heartbeats: []*workerpb.HeartbeatEntry{{Heartbeat: heartbeat("w-1"), LeaseDuration: durationpb.New(3 * time.Second)}},
		})
		require.NoError(t, err)
		require.Nil(t, resp.Results[0].Error)
		return resp.Results[0]
	}
	counter := func(suffix string) (n int64) {
		for _, c := range host.Scope.(tally.TestScope).Snapshot().Counters() {
			if strings.HasSuffix(c.Name(), suffix) {
				n += c.Value()
			}
		}
		return n
	}
	t0 := ts.Now()
	beat() // written: the timer at t0+3s
	var last *workerpb.HeartbeatResult
	for range 7 { // past the stored timer's time, each deadline within the bound
		ts.Advance(time.Second)
		last = beat()
	}
	deadline := last.LeaseDeadline.AsTime()
	require.Equal(t, t0.Add(10*time.Second), deadline)

	ts.Advance(deadline.Sub(ts.Now()))
	require.Eventually(t, func() bool {
		return r.state(host, "w-1").Status == workerpb.WorkerStatus_WORKER_STATUS_INACTIVE
	}, 10*time.Second, 5*time.Millisecond, "the silent worker is declared dead at its deadline")
	require.Equal(t, deadline, r.state(host, "w-1").InactiveTime.AsTime())
	require.Equal(t, int64(1), counter("timer_tasks_fired"), "the expiry timer ran once, when the lease ran out")
	require.Zero(t, counter("timer_tasks_deferred"), "it never ran early to find the lease extended")
}

// TestASuspicionEndsTheHoldOnTheExpiryTimer: a connection suspicion that cuts the lease to a
// deadline after the stored timer, which it therefore leaves in place, still ends the worker
// at that deadline: the hold the heartbeats set before does not outlive the change.
func TestASuspicionEndsTheHoldOnTheExpiryTimer(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	r.dcClient.OverrideValue(worker.HeartbeatWriteInterval.Key(), "10s")
	r.dcClient.OverrideValue(worker.SuspectGracePeriod.Key(), "1500ms")
	ts := r.ts
	host, handler := r.start()
	beat := func() {
		resp, err := handler.RecordHeartbeats(context.Background(), &workerpb.RecordHeartbeatsRequest{
			NamespaceId: "ns-id", Namespace: "ns",
			Heartbeats: []*workerpb.HeartbeatEntry{{Heartbeat: heartbeat("w-1"), LeaseDuration: durationpb.New(3 * time.Second)}},
		})
		require.NoError(t, err)
		require.Nil(t, resp.Results[0].Error)
	}
	t0 := ts.Now()
	beat() // written: the timer at t0+3s
	ts.Advance(time.Second)
	beat()
	ts.Advance(time.Second)
	beat() // answered from memory: deadline t0+5s, the timer held until then
	_, err := handler.ReportConnections(context.Background(), &workerpb.ReportConnectionsRequest{Reports: []*workerpb.ConnectionReport{
		{NamespaceId: "ns-id", Namespace: "ns", WorkerInstanceKey: "w-1", Lost: true},
	}})
	require.NoError(t, err)
	require.Equal(t, t0.Add(3500*time.Millisecond), r.state(host, "w-1").SuspectDeadline.AsTime())

	ts.Advance(time.Second) // t0+3s: the stored timer fires, and waits for the suspect deadline
	ts.Advance(500 * time.Millisecond)
	require.Eventually(t, func() bool {
		return r.state(host, "w-1").Status == workerpb.WorkerStatus_WORKER_STATUS_INACTIVE
	}, 10*time.Second, 5*time.Millisecond, "the suspect worker is declared dead at the suspect deadline")
	st := r.state(host, "w-1")
	require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST, st.InactiveReason)
	require.Equal(t, t0.Add(3500*time.Millisecond), st.InactiveTime.AsTime())
}
