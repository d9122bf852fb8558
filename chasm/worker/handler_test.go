package worker_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workerv1 "go.temporal.io/api/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/shard"
	"github.com/vigilhq/vigil/dynamicconfig"
)

func TestHeartbeat(t *testing.T) {
	t.Parallel()

	t.Run("FirstHeartbeatRegistersAnActiveWorkerWithAServerClockLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		now := b.engine.Now()
		r := b.mustBeat("w1")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, r.Status)
		require.Equal(t, now.Add(30*time.Second), r.LeaseDeadline.AsTime(), "default lease from the server's clock")
		require.EqualValues(t, 1, r.ConflictToken)

		rec := b.describe("w1")
		require.Equal(t, "orders", rec.State.LastHeartbeat.TaskQueue)
		require.Equal(t, testNamespace, rec.State.Namespace)
		require.Equal(t, now, rec.State.FirstHeartbeatTime.AsTime())
	})

	t.Run("HeartbeatRenewsTheLeaseAndReplacesTheExpiryTimer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.mustBeat("w1")
		b.engine.AdvanceTime(20 * time.Second)
		second := b.mustBeat("w1")
		require.True(t, second.LeaseDeadline.AsTime().After(first.LeaseDeadline.AsTime()))
		require.EqualValues(t, 2, second.ConflictToken)
		require.Len(t, b.engine.PendingTasksOfType("worker.leaseExpiry"), 1, "one expiry timer per worker")

		b.engine.AdvanceTime(10 * time.Second) // the first lease's deadline passes
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"))
		b.engine.AdvanceTime(20 * time.Second) // the second one's
		rec := b.describe("w1")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, rec.State.Status)
		require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_LEASE_EXPIRED, rec.State.InactiveReason)
		require.Equal(t, second.LeaseDeadline.AsTime(), rec.State.InactiveTime.AsTime(), "INACTIVE at the deadline")
	})

	t.Run("BindingDeltasAreIdempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.mustBeat("w1", withBound(binding("a", 1), binding("b", 1)))
		b.mustBeat("w1", withBound(binding("a", 1)))             // again: no change
		b.mustBeat("w1", withUnbound(binding("never-bound", 1))) // unknown: no change
		b.mustBeat("w1", withUnbound(binding("b", 7)))           // another attempt's stamp: kept
		b.mustBeat("w1", withBound(binding("a", 2)))             // a newer attempt replaces
		rec := b.describe("w1")
		require.EqualValues(t, 2, rec.State.BoundActivityCount)
		stamps := map[string]int64{}
		for _, ba := range rec.BoundActivities {
			stamps[ba.ActivityId] = ba.Stamp
		}
		require.Equal(t, map[string]int64{"a": 2, "b": 1}, stamps)

		b.mustBeat("w1", withUnbound(binding("b", 1), binding("a", 0))) // stamp 0 = any attempt
		require.Zero(t, b.describe("w1").State.BoundActivityCount)
	})

	t.Run("StaleConflictTokenIsRefusedWithTheCurrentToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.mustBeat("w1")
		b.mustBeat("w1", withToken(1))
		r := b.beat("w1", withToken(1), withBound(binding("a", 1)))
		require.NotNil(t, r.Error)
		require.EqualValues(t, codes.FailedPrecondition, r.Error.Code)
		require.EqualValues(t, 2, r.Error.CurrentConflictToken)
		require.Zero(t, b.describe("w1").State.BoundActivityCount, "nothing applied")

		b.mustBeat("w1", withToken(r.Error.CurrentConflictToken))
	})

	t.Run("LeaseIsClampedAndAdaptsToTheReportedInterval", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(dynamicconfig.MaxLeaseDuration.Key(), testNamespace, "2m")
		b.dc.OverrideNamespaceValue(dynamicconfig.MinLeaseDuration.Key(), testNamespace, "2s")
		lease := func(r *workerpb.HeartbeatResult) time.Duration { return r.LeaseDeadline.AsTime().Sub(b.engine.Now()) }

		require.Equal(t, 2*time.Minute, lease(b.mustBeat("w1", withLease(time.Hour))))
		require.Equal(t, 2*time.Second, lease(b.mustBeat("w1", withLease(100*time.Millisecond))))
		require.Equal(t, 45*time.Second, lease(b.mustBeat("w1", withLease(45*time.Second))))
		require.Equal(t, 6*time.Second, lease(b.mustBeat("w4", withElapsed(2*time.Second))), "3 × the SDK's interval")
		require.Equal(t, 2*time.Second, lease(b.mustBeat("w5", withElapsed(100*time.Millisecond))), "never below the minimum")
		require.Equal(t, 30*time.Second, lease(b.mustBeat("w2")), "the namespace default without an interval")
		b.engine.AdvanceTime(time.Minute) // past the leases above: each beat below sets its own
		require.Equal(t, 6*time.Second, lease(b.mustBeat("w1", withElapsed(2*time.Second))), "an SDK beat after explicit leases")

		// A beat the server sees 5 s after the previous one, whatever the SDK reports (its
		// previous beat was held up), gets a lease covering that gap.
		b.mustBeat("w3", withElapsed(2*time.Second)) // a 6 s lease
		b.engine.AdvanceTime(5 * time.Second)
		require.Equal(t, 15*time.Second, lease(b.mustBeat("w3", withElapsed(300*time.Millisecond))), "3 × the interval the server saw")
	})

	// After a stall (its shard moving between hosts, a paused host holding its call) the SDK
	// sends the held beat and at once the next one, its ticker having kept a tick: that one
	// reports an interval of a few milliseconds. Its lease must still cover the next regular
	// beat, a second later, or that beat finds the worker INACTIVE (seen in
	// TestClusterProcessSIGSTOP: a lease of 1 s granted 11 ms before the beat that followed).
	t.Run("ABeatRightAfterAStallGetsALeaseOfTheCadence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(dynamicconfig.MinLeaseDuration.Key(), testNamespace, "1s")
		lease := func(r *workerpb.HeartbeatResult) time.Duration { return r.LeaseDeadline.AsTime().Sub(b.engine.Now()) }
		for range 3 {
			require.Equal(t, 3*time.Second, lease(b.mustBeat("w1", withElapsed(time.Second))), "the usual cadence")
			b.engine.AdvanceTime(time.Second)
		}
		b.engine.AdvanceTime(1500 * time.Millisecond) // the stall: 2.5 s since the last beat applied
		require.Equal(t, 7500*time.Millisecond, lease(b.mustBeat("w1", withElapsed(time.Second))), "the held beat covers the gap")
		b.engine.AdvanceTime(40 * time.Millisecond)
		require.Equal(t, 7460*time.Millisecond, lease(b.mustBeat("w1", withElapsed(40*time.Millisecond))),
			"the catch-up beat (3 × the previous beat's interval, not the minimum) leaves the held beat's longer lease")

		// The regular beats that follow, 1.2 s apart on a slow box, find it ACTIVE (AdvanceTime
		// fires the expiry timer when it comes due).
		for range 3 {
			b.engine.AdvanceTime(1200 * time.Millisecond)
			require.False(t, b.mustBeat("w1", withElapsed(time.Second)).GetResurrected(), "declared INACTIVE between two beats")
		}
		// Once the stall's lease has run out, the lease is back to 3 × the cadence.
		for range 5 {
			b.engine.AdvanceTime(time.Second)
			b.mustBeat("w1", withElapsed(time.Second))
		}
		b.engine.AdvanceTime(time.Second)
		require.Equal(t, 3*time.Second, lease(b.mustBeat("w1", withElapsed(time.Second))))
		require.Zero(t, b.describe("w1").State.ResurrectionCount)
	})

	// A heartbeat can be applied twice, or after a later one of the same worker: a call resent
	// to its shard's next owner after its first delivery committed, or the copy of a call held
	// in a frozen connection between two hosts, which reaches the owner once the connection
	// thaws, after the call was answered through another host. Such copies arrive together,
	// each reporting the short interval the SDK saw when it sent it (its beat right after a slow
	// one), milliseconds after the beat applied before. Read from those intervals alone the lease
	// would be the minimum, and the worker's next regular beat would find it INACTIVE.
	t.Run("AHeartbeatAppliedAgainNeverShortensTheLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(dynamicconfig.MinLeaseDuration.Key(), testNamespace, "1s")
		var sent []time.Time // each beat's heartbeat_time, by the SDK's clock
		beat := func(elapsed time.Duration) *workerpb.HeartbeatResult {
			sent = append(sent, b.engine.Now())
			return b.mustBeat("w1", withElapsed(elapsed), withSentAt(b.engine.Now()))
		}
		beat(time.Second)
		b.engine.AdvanceTime(time.Second)
		beat(100 * time.Millisecond) // sent right after a slow beat
		b.engine.AdvanceTime(time.Second)
		granted := beat(time.Second).LeaseDeadline.AsTime()
		for _, at := range sent[:2] { // the copies of earlier beats, as sent
			b.engine.AdvanceTime(5 * time.Millisecond)
			r := b.mustBeat("w1", withElapsed(100*time.Millisecond), withSentAt(at))
			require.False(t, r.LeaseDeadline.AsTime().Before(granted), "an acknowledged lease was taken back")
		}
		require.Equal(t, sent[2], b.describe("w1").State.LastHeartbeat.HeartbeatTime.AsTime(), "an older copy replaced the newest snapshot")
		// The next regular beat, 1.2 s on, finds the worker ACTIVE (AdvanceTime fires the expiry
		// timer when it comes due).
		b.engine.AdvanceTime(1200 * time.Millisecond)
		require.False(t, beat(time.Second).GetResurrected(), "declared INACTIVE between two beats")
		require.Zero(t, b.describe("w1").State.ResurrectionCount)

		// A lease the worker asks for is its own: a shorter one replaces the current one.
		require.Equal(t, time.Second, b.mustBeat("w1", withLease(time.Second)).LeaseDeadline.AsTime().Sub(b.engine.Now()))
	})

	// A worker's first beat reports no interval and gets the namespace default; its next beat,
	// sent later, gives way to three of its intervals, so a worker that hangs soon after it
	// started is found within seconds, not at the default's end.
	t.Run("ANewerBeatShortensTheFirstLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lease := func(r *workerpb.HeartbeatResult) time.Duration { return r.LeaseDeadline.AsTime().Sub(b.engine.Now()) }
		require.Equal(t, 30*time.Second, lease(b.mustBeat("w1", withSentAt(b.engine.Now()))))
		b.engine.AdvanceTime(time.Second)
		require.Equal(t, 3*time.Second, lease(b.mustBeat("w1", withElapsed(time.Second), withSentAt(b.engine.Now()))))
		require.Equal(t, 3*time.Second, b.describe("w1").State.LeaseDuration.AsDuration())
	})

	t.Run("TooManyBindingsAreRefusedAndNothingIsApplied", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(dynamicconfig.MaxBindingsPerWorker.Key(), testNamespace, 2)
		b.mustBeat("w1", withBound(binding("a", 1)))
		r := b.beat("w1", withBound(binding("b", 1), binding("c", 1)))
		require.NotNil(t, r.Error)
		require.EqualValues(t, codes.InvalidArgument, r.Error.Code)
		require.Contains(t, r.Error.Message, "worker.maxBindingsPerWorker")
		rec := b.describe("w1")
		require.EqualValues(t, 1, rec.State.BoundActivityCount)
		require.EqualValues(t, 1, rec.State.HeartbeatCount, "the refused heartbeat did not renew the lease either")
	})

	t.Run("EachHeartbeatOfARequestSucceedsOrFailsAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp, err := b.handler.RecordHeartbeats(b.ctx, &workerpb.RecordHeartbeatsRequest{
			NamespaceId: testNamespaceID, Namespace: testNamespace,
			Heartbeats: []*workerpb.HeartbeatEntry{
				{Heartbeat: heartbeat("w1")},
				{Heartbeat: heartbeat("")},
				{Heartbeat: heartbeat("w2")},
			},
		})
		require.NoError(t, err)
		require.Nil(t, resp.Results[0].Error)
		require.EqualValues(t, codes.InvalidArgument, resp.Results[1].Error.Code)
		require.Nil(t, resp.Results[2].Error)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w2"))
	})

	t.Run("DrainIsAnsweredOnLaterHeartbeats", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.False(t, b.mustBeat("w1").ShouldDrain)
		_, err := b.handler.DrainWorker(b.ctx, &workerpb.DrainWorkerRequest{NamespaceId: testNamespaceID, WorkerInstanceKey: "w1"})
		require.NoError(t, err)
		require.True(t, b.mustBeat("w1").ShouldDrain)

		b.shutdown("w1")
		_, err = b.handler.DrainWorker(b.ctx, &workerpb.DrainWorkerRequest{NamespaceId: testNamespaceID, WorkerInstanceKey: "w1"})
		var fp *serviceerror.FailedPrecondition
		require.ErrorAs(t, err, &fp)
		_, err = b.handler.DrainWorker(b.ctx, &workerpb.DrainWorkerRequest{NamespaceId: testNamespaceID, WorkerInstanceKey: "nobody"})
		var nf *serviceerror.NotFound
		require.ErrorAs(t, err, &nf)
	})

	t.Run("ListWorkersPagesEveryWorkerOnceAndFiltersByStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for i := range 25 {
			b.mustBeat(fmt.Sprintf("w%02d", i))
		}
		for i := range 5 {
			b.shutdown(fmt.Sprintf("w%02d", i))
		}
		seen := map[string]int{}
		var token []byte
		for {
			resp, err := b.handler.ListWorkers(b.ctx, &workerpb.ListWorkersRequest{NamespaceId: testNamespaceID, PageSize: 7, NextPageToken: token})
			require.NoError(t, err)
			for _, w := range resp.Workers {
				seen[w.WorkerInstanceKey]++
			}
			if token = resp.NextPageToken; token == nil {
				break
			}
		}
		require.Len(t, seen, 25)
		for key, n := range seen {
			require.Equal(t, 1, n, key)
		}
		resp, err := b.handler.ListWorkers(b.ctx, &workerpb.ListWorkersRequest{
			NamespaceId: testNamespaceID, Status: workerpb.WorkerStatus_WORKER_STATUS_INACTIVE,
		})
		require.NoError(t, err)
		require.Len(t, resp.Workers, 5)
	})
}

// bindingsOverShards binds n activities, spread over the shards: how many land in each.
func bindingsOverShards(n int) ([]*workerpb.ActivityBinding, map[int32]int) {
	var bindings []*workerpb.ActivityBinding
	shards := map[int32]int{}
	for i := range n {
		id := fmt.Sprintf("act-%d", i)
		bindings = append(bindings, binding(id, 1))
		shards[shard.ForKey(testNamespaceID, id, testNumShards)]++
	}
	return bindings, shards
}

func TestShutdown(t *testing.T) {
	t.Parallel()

	t.Run("ReschedulesBoundActivitiesAtOnceInOneTaskThatReachesEveryShard", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bindings, shards := bindingsOverShards(40)
		require.Greater(t, len(shards), 3, "the bindings span several shards")
		b.mustBeat("w1", withBound(bindings...))

		resp := b.shutdown("w1")
		require.EqualValues(t, 40, resp.RescheduledActivities)
		rec := b.describe("w1")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, rec.State.Status)
		require.Equal(t, workerpb.InactiveReason_INACTIVE_REASON_SHUTDOWN, rec.State.InactiveReason)
		require.Empty(t, rec.BoundActivities)
		require.Len(t, rec.State.PendingReschedules, len(shards), "a batch per destination shard")

		tasks := b.engine.SideEffectTasks()
		require.Len(t, tasks, 1, "one task row for the whole hand-back")
		require.Len(t, tasks[0].Task.Payload.(*workerpb.ActivityRescheduleFanOutTask).Batches, len(shards))
		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx))
		got := map[int32]int{}
		for _, req := range b.rescheduler.received() {
			require.Equal(t, "w1", req.WorkerInstanceKey)
			for _, a := range req.Activities {
				require.Equal(t, req.ShardId, shard.ForKey(a.NamespaceId, a.ActivityId, testNumShards), "sent to its own shard")
			}
			got[req.ShardId] += len(req.Activities)
		}
		require.Equal(t, shards, got)
		require.Empty(t, b.describe("w1").State.PendingReschedules, "acknowledged batches are done")
		require.Empty(t, b.engine.SideEffectTasks())
	})

	t.Run("IsIdempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.mustBeat("w1", withBound(binding("a", 1)))
		require.EqualValues(t, 1, b.shutdown("w1").RescheduledActivities)
		before := b.describe("w1")
		require.Zero(t, b.shutdown("w1").RescheduledActivities)
		require.Equal(t, before.State.InactiveEpoch, b.describe("w1").State.InactiveEpoch)
		require.Len(t, b.engine.SideEffectTasks(), 1)
	})

	t.Run("OfAnUnknownWorkerAnswersOKAndCreatesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Zero(t, b.shutdown("never-heartbeated").RescheduledActivities)
		_, err := b.handler.DescribeWorker(b.ctx, &workerpb.DescribeWorkerRequest{
			NamespaceId: testNamespaceID, WorkerInstanceKey: "never-heartbeated",
		})
		var notFound *serviceerror.NotFound
		require.ErrorAs(t, err, &notFound)
	})
}

// An SDK worker left at its defaults heartbeats every 60 s, and its first beat reports no
// interval. Its first lease must outlast that interval, or every such worker would be declared
// INACTIVE once, and lose its activities, before its second beat.
func TestWorkerAtTheSDKsDefaultIntervalKeepsItsFirstLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.useDefaultLease()
	b.mustBeat("w1")
	b.engine.AdvanceTime(60*time.Second + 2*time.Second) // the second beat, a little late
	require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"))
	require.False(t, b.mustBeat("w1", withElapsed(62*time.Second)).GetResurrected())
	require.Equal(t, int64(0), b.describe("w1").GetState().GetResurrectionCount())
}

func TestConfigLeaseFor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name                string
		requested, interval time.Duration
		want                time.Duration
	}{
		{"Default", 0, 0, 30 * time.Second}, // setup's; the built-in one is 3m
		{"Requested", 15 * time.Second, 0, 15 * time.Second},
		{"RequestedWinsOverInterval", 15 * time.Second, time.Second, 15 * time.Second},
		{"AdaptiveFromInterval", 0, 5 * time.Second, 15 * time.Second},
		{"ClampedToMin", 0, 10 * time.Millisecond, time.Second},
		{"ClampedToMax", time.Hour, 0, 10 * time.Minute},
		// 315,576,000,000 s (the largest Duration a client can send) saturates AsDuration; three
		// times it used to wrap around to the minimum lease.
		{"HugeIntervalClampedToMax", 0, time.Duration(math.MaxInt64), 10 * time.Minute},
		{"IntervalJustOverMax", 0, 4 * time.Minute, 10 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, b.config.LeaseFor(testNamespace, tc.requested, tc.interval))
		})
	}
	_ = worker.RescheduleChunkSizeDefault
}

func TestShutdownEcho(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mustBeat("w1")
	b.shutdown("w1")
	echo := func(e *workerpb.HeartbeatEntry) { e.Heartbeat.Status = enumspb.WORKER_STATUS_SHUTTING_DOWN }
	r := b.mustBeat("w1", echo)
	require.False(t, r.Resurrected)
	rec := b.describe("w1")
	require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, rec.State.Status)
	require.Equal(t, enumspb.WORKER_STATUS_SHUTTING_DOWN, rec.State.LastHeartbeat.Status, "the snapshot is kept")

	// A running worker reusing the key after a shutdown is a real comeback.
	require.True(t, b.mustBeat("w1").Resurrected)
}

func TestUpdateBindings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	update := func(key string, bound, unbound []*workerpb.ActivityBinding) workerpb.BindOutcome {
		resp, err := b.handler.UpdateBindings(b.ctx, &workerpb.UpdateBindingsRequest{
			NamespaceId: testNamespaceID, WorkerInstanceKey: key, Bound: bound, Unbound: unbound,
		})
		require.NoError(t, err)
		return resp.Outcome
	}
	require.Equal(t, workerpb.BindOutcome_BIND_OUTCOME_WORKER_UNKNOWN, update("nobody", []*workerpb.ActivityBinding{binding("a", 1)}, nil))

	first := b.mustBeat("w1")
	require.Equal(t, workerpb.BindOutcome_BIND_OUTCOME_APPLIED, update("w1", []*workerpb.ActivityBinding{binding("a", 1), binding("b", 1)}, nil))
	rec := b.describe("w1")
	require.EqualValues(t, 2, rec.State.BoundActivityCount)
	require.Equal(t, first.LeaseDeadline.AsTime(), rec.State.LeaseDeadline.AsTime(), "binding does not renew the lease")

	require.Equal(t, workerpb.BindOutcome_BIND_OUTCOME_APPLIED, update("w1", nil, []*workerpb.ActivityBinding{binding("a", 1)}))
	require.EqualValues(t, 1, b.describe("w1").State.BoundActivityCount)

	b.engine.AdvanceTime(30 * time.Second) // expires: "b" goes back to its shard
	require.Equal(t, workerpb.BindOutcome_BIND_OUTCOME_WORKER_NOT_ACTIVE, update("w1", []*workerpb.ActivityBinding{binding("c", 1)}, nil))
	require.Zero(t, b.describe("w1").State.BoundActivityCount)
}

// TestRegistrationBurst: a fleet that starts at once (every SDK process mints a new key)
// registers whole as long as it is no larger than worker.registrationBurst, however far above
// worker.registrationRPS; a namespace that goes on minting keys is then held to the rate, and
// known workers never wait on either.
func TestRegistrationBurst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dc.OverrideValue(dynamicconfig.WorkerRegistrationRPS.Key(), 2.0)
	b.dc.OverrideValue(dynamicconfig.WorkerRegistrationBurst.Key(), 50)
	for i := range 50 {
		b.mustBeat(fmt.Sprintf("deploy-%d", i))
	}
	refused := b.beat("one-too-many")
	require.NotNil(t, refused.Error)
	require.EqualValues(t, codes.ResourceExhausted, refused.Error.Code)
	require.Contains(t, refused.Error.Message, "worker.registrationBurst")
	b.mustBeat("deploy-7") // a known worker

	b.engine.AdvanceTime(time.Second) // two more tokens, at the sustained rate
	b.mustBeat("late-1")
	b.mustBeat("late-2")
	require.NotNil(t, b.beat("late-3").Error)

	b.dc.OverrideValue(dynamicconfig.WorkerRegistrationBurst.Key(), 0) // one second's worth
	b.mustBeat("after-1")
	b.mustBeat("after-2")
	require.NotNil(t, b.beat("after-3").Error)
}

func TestMaxWorkersPerNamespace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dc.OverrideValue(dynamicconfig.MaxWorkersPerNamespace.Key(), 2)
	b.mustBeat("w1")
	b.mustBeat("w2")

	refused := b.beat("w3")
	require.NotNil(t, refused.Error)
	require.EqualValues(t, codes.ResourceExhausted, refused.Error.Code)
	require.Contains(t, refused.Error.Message, "worker.maxWorkersPerNamespace")
	_, err := b.handler.DescribeWorker(b.ctx, &workerpb.DescribeWorkerRequest{NamespaceId: testNamespaceID, WorkerInstanceKey: "w3"})
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, err, &notFound, "a refused registration leaves nothing behind")

	b.mustBeat("w1") // known workers keep heartbeating at the cap

	b.handler.SetWorkerCount(testNamespaceID, 1) // the store counted one record (say w2 was deleted)
	b.mustBeat("w3")
	require.NotNil(t, b.beat("w4").Error, "one counted plus one registered since: the cap again")
}

// The SDK sends its environment only until a heartbeat is accepted: later heartbeats keep it,
// and the heartbeats the caller sent are left as they were.
func TestEnvironmentIsKeptWhenALaterHeartbeatOmitsIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	env := &workerv1.EnvironmentInfo{Runtimes: []*workerv1.EnvironmentInfo_Runtime{{Version: "go1.26"}}}
	b.mustBeat("w1", func(e *workerpb.HeartbeatEntry) { e.Heartbeat.Environment = env })

	later := heartbeat("w1")
	later.SdkVersion = "1.2.3"
	b.mustBeat("w1", func(e *workerpb.HeartbeatEntry) { e.Heartbeat = later })
	kept := b.describe("w1").State.LastHeartbeat
	require.Equal(t, "1.2.3", kept.GetSdkVersion(), "the later snapshot")
	require.True(t, proto.Equal(env, kept.GetEnvironment()), "with the earlier environment")
	require.Nil(t, later.Environment, "the sent heartbeat is not modified")
}
