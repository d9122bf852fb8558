package worker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/dynamicconfig"
)

func (b *bundle) report(key string, lost bool) {
	b.t.Helper()
	resp, err := b.handler.ReportConnections(b.ctx, &workerpb.ReportConnectionsRequest{Reports: []*workerpb.ConnectionReport{{
		NamespaceId: testNamespaceID, Namespace: testNamespace, WorkerInstanceKey: key, Lost: lost,
	}}})
	require.NoError(b.t, err)
	require.Len(b.t, resp.Errors, 1)
	require.Zero(b.t, resp.Errors[0].GetCode(), "report failed: %v", resp.Errors[0])
}

func TestConnectionSuspicion(t *testing.T) {
	t.Parallel()

	t.Run("LostConnectionWithoutPollOrHeartbeatIsConnectionLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(worker.SuspectGracePeriod.Key(), testNamespace, "1s")
		b.mustBeat("w1", withLease(time.Minute), withBound(binding("a", 1)))
		b.report("w1", true)
		s := b.describe("w1").State
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, s.Status)
		require.Equal(t, b.engine.Now(), s.SuspectSince.AsTime())
		require.Equal(t, b.engine.Now().Add(time.Second), s.SuspectDeadline.AsTime())
		require.Equal(t, workerpb.SuspectReason_SUSPECT_REASON_CONNECTION_CLOSED, s.SuspectReason)
		require.Equal(t, b.engine.Now().Add(time.Minute), s.LeaseDeadline.AsTime(), "the heartbeat's lease is kept")
		require.NotEmpty(t, worker.SuspectDescription(s))

		b.engine.AdvanceTime(999 * time.Millisecond)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"))
		b.engine.AdvanceTime(time.Millisecond)
		s = b.describe("w1").State
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, s.Status)
		require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST, s.InactiveReason)
		require.Nil(t, s.SuspectDeadline)
		require.Len(t, b.engine.SideEffectTasks(), 1, "its activity goes back to its shard")
	})

	t.Run("HeartbeatClearsAndTheLeaseApplies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(worker.SuspectGracePeriod.Key(), testNamespace, "1s")
		b.mustBeat("w1", withLease(time.Minute))
		b.report("w1", true)
		b.engine.AdvanceTime(500 * time.Millisecond)
		b.mustBeat("w1", withLease(time.Minute))
		s := b.describe("w1").State
		require.Nil(t, s.SuspectDeadline)
		require.EqualValues(t, 1, s.SuspicionsRaised)
		require.EqualValues(t, 1, s.SuspicionsCleared)
		b.engine.AdvanceTime(59 * time.Second)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"), "the heartbeat's lease, not the grace")
		b.engine.AdvanceTime(2 * time.Second)
		s = b.describe("w1").State
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, s.Status)
		require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_LEASE_EXPIRED, s.InactiveReason)
	})

	t.Run("SeenAgainClearsAndTheLeaseApplies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(worker.SuspectGracePeriod.Key(), testNamespace, "1s")
		b.mustBeat("w1", withLease(time.Minute), withBound(binding("a", 1)))
		b.report("w1", true)
		b.engine.AdvanceTime(300 * time.Millisecond)
		b.report("w1", false)
		b.engine.AdvanceTime(30 * time.Second)
		s := b.describe("w1").State
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, s.Status)
		require.Nil(t, s.SuspectSince)
		require.EqualValues(t, 1, s.BoundActivityCount, "nothing was rescheduled")
		require.Empty(t, b.engine.SideEffectTasks())
		b.engine.AdvanceTime(31 * time.Second)
		require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_LEASE_EXPIRED, b.describe("w1").State.InactiveReason)
	})

	t.Run("OnlyEverShortensTheLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(worker.SuspectGracePeriod.Key(), testNamespace, "10s")
		b.mustBeat("w1", withLease(3*time.Second))
		b.report("w1", true)
		s := b.describe("w1").State
		require.Equal(t, s.LeaseDeadline.AsTime(), s.SuspectDeadline.AsTime())
		b.engine.AdvanceTime(3 * time.Second)
		require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_LEASE_EXPIRED, b.describe("w1").State.InactiveReason,
			"the lease ran out: the suspicion did not shorten it")
	})

	t.Run("GraceGrowsWithSuspicionsInARowAsTheSDKBacksOff", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(worker.SuspectGracePeriod.Key(), testNamespace, "500ms")
		b.mustBeat("w1", withLease(time.Hour))
		var graces []time.Duration
		for range 5 {
			b.report("w1", true)
			s := b.describe("w1").State
			graces = append(graces, s.SuspectDeadline.AsTime().Sub(s.SuspectSince.AsTime()))
			b.engine.AdvanceTime(100 * time.Millisecond)
			b.report("w1", false)
			b.engine.AdvanceTime(10 * time.Second)
		}
		require.Equal(t, []time.Duration{500 * time.Millisecond, 2 * time.Second, 8 * time.Second, 20 * time.Second, 20 * time.Second}, graces)

		b.engine.AdvanceTime(3 * time.Minute) // its polls have succeeded since: the SDK starts over
		b.mustBeat("w1", withLease(time.Hour))
		b.report("w1", true)
		s := b.describe("w1").State
		require.Equal(t, 500*time.Millisecond, s.SuspectDeadline.AsTime().Sub(s.SuspectSince.AsTime()))
	})

	t.Run("ALossOfASuspectWorkerIsANewSuspicion", func(t *testing.T) {
		t.Parallel()
		// The frontend reports a worker lost again only after it saw it again; the report of
		// that may have been replaced by the new loss before it was sent.
		b := setup(t)
		b.dc.OverrideNamespaceValue(worker.SuspectGracePeriod.Key(), testNamespace, "1s")
		b.mustBeat("w1", withLease(time.Minute))
		b.report("w1", true)
		b.engine.AdvanceTime(600 * time.Millisecond)
		b.report("w1", true)
		s := b.describe("w1").State
		require.Equal(t, b.engine.Now(), s.SuspectSince.AsTime())
		require.Equal(t, b.engine.Now().Add(4*time.Second), s.SuspectDeadline.AsTime(), "the second in a row: 4× the grace")
		require.EqualValues(t, 2, s.SuspicionsRaised)
		b.engine.AdvanceTime(4 * time.Second)
		require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST, b.describe("w1").State.InactiveReason)
	})

	t.Run("GraceZeroTurnsItOff", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(worker.SuspectGracePeriod.Key(), testNamespace, "0s")
		b.mustBeat("w1", withLease(time.Minute))
		b.report("w1", true)
		require.Nil(t, b.describe("w1").State.SuspectSince)
		b.engine.AdvanceTime(30 * time.Second)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"))
	})

	t.Run("ShutdownWinsOverSuspicion", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.mustBeat("w1", withLease(time.Minute))
		b.shutdown("w1")
		b.report("w1", true) // its connection closes after the goodbye
		s := b.describe("w1").State
		require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_SHUTDOWN, s.InactiveReason)
		require.Nil(t, s.SuspectSince)
	})

	t.Run("UnknownWorkersAndClearsOfHealthyOnesChangeNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.report("never-seen", true)
		b.report("never-seen", false)
		b.mustBeat("w1", withLease(time.Minute))
		token := b.describe("w1").State.ConflictToken
		b.report("w1", false)
		s := b.describe("w1").State
		require.Equal(t, token, s.ConflictToken)
		require.Zero(t, s.SuspicionsCleared)
	})

	t.Run("AnotherPrincipalCannotRaiseIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp, err := b.handler.RecordHeartbeats(b.ctx, &workerpb.RecordHeartbeatsRequest{
			NamespaceId: testNamespaceID, Namespace: testNamespace, Principal: "alice",
			Heartbeats: []*workerpb.HeartbeatEntry{{Heartbeat: heartbeat("w1")}},
		})
		require.NoError(t, err)
		require.Nil(t, resp.Results[0].Error)
		_, err = b.handler.ReportConnections(b.ctx, &workerpb.ReportConnectionsRequest{Reports: []*workerpb.ConnectionReport{{
			NamespaceId: testNamespaceID, Namespace: testNamespace, WorkerInstanceKey: "w1", Lost: true, Principal: "mallory",
		}}})
		require.NoError(t, err)
		require.Nil(t, b.describe("w1").State.SuspectSince)
	})

	t.Run("BadReportIsInvalidArgumentAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.mustBeat("w1", withLease(time.Minute))
		resp, err := b.handler.ReportConnections(b.ctx, &workerpb.ReportConnectionsRequest{Reports: []*workerpb.ConnectionReport{
			{NamespaceId: testNamespaceID, Namespace: testNamespace, Lost: true},
			{NamespaceId: testNamespaceID, Namespace: testNamespace, WorkerInstanceKey: "w1", Lost: true},
		}})
		require.NoError(t, err)
		require.NotZero(t, resp.Errors[0].GetCode())
		require.Zero(t, resp.Errors[1].GetCode())
		require.NotNil(t, b.describe("w1").State.SuspectSince)
	})
}

func TestSuspicionAndTheExpiryBrake(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) *brakeBundle {
		b := setupBrake(t)
		b.handler = worker.NewHandler(b.engine, b.config, b.engine.Clock(), tally.NoopScope, zaptest.NewLogger(t), worker.WithBrakeStatus(b.brake))
		b.dc.OverrideNamespaceValue(worker.SuspectGracePeriod.Key(), testNamespace, "500ms")
		b.dc.OverrideNamespaceValue(dynamicconfig.ExpiryBrakeThreshold.Key(), testNamespace, 0.3)
		return b
	}

	t.Run("OneLostWorkerIsNotHeldBeyondItsGrace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		keys := workerKeys("w", 10)
		for _, k := range keys {
			b.mustBeat(k, withLease(time.Minute))
		}
		b.report(keys[0], true)
		b.engine.AdvanceTime(500 * time.Millisecond)
		s := b.describe(keys[0]).State
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, s.Status, "found when its grace ran out")
		require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST, s.InactiveReason)
	})

	t.Run("AMassConnectionLossIsHeld", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		keys := workerKeys("w", 10)
		for _, k := range keys {
			b.mustBeat(k, withLease(time.Minute))
		}
		for _, k := range keys[:6] { // the server's own network drops: most connections close at once
			b.report(k, true)
		}
		b.engine.AdvanceTime(5 * time.Second)
		require.Zero(t, b.inactive(keys), "held by the brake")
		st := b.brake.Status(testNamespaceID)
		require.True(t, st.Engaged)
		// The network comes back: the workers reconnect and are cleared; nobody was declared dead.
		for _, k := range keys[:6] {
			b.report(k, false)
		}
		b.engine.AdvanceTime(5 * time.Second)
		require.Zero(t, b.inactive(keys))
		for _, k := range keys[:6] {
			require.Nil(t, b.describe(k).State.SuspectSince)
		}
	})
}
