package activity_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/history/historytest"
)

const hostNumShards = 4

// hostBundle runs the Activity and Worker components together on a real history host (SQLite
// file, real clock), wired as the server wires them: binds and reschedules travel over the
// history RPC; matching and worker commands are recorders.
type hostBundle struct {
	t          *testing.T
	host       *historytest.Host
	activities *activity.Handler
	workers    *worker.Handler
	dispatcher *recordingDispatcher
	sender     *recordingSender
}

func startActivityHost(t *testing.T, path string, dispatcher *recordingDispatcher) *hostBundle {
	t.Helper()
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	dcClient := dynamicconfig.NewMemoryClient()
	dc := dynamicconfig.NewCollection(dcClient, logger)
	membership := &history.LocalMembership{}
	router := history.NewRouter(hostNumShards, membership)
	t.Cleanup(func() { _ = router.Close() })

	b := &hostBundle{t: t, dispatcher: dispatcher, sender: &recordingSender{}}
	activityConfig := activity.NewConfig(dc, hostNumShards)
	workerConfig := worker.NewConfig(dc, hostNumShards)
	libs := []chasm.Library{
		activity.NewLibrary(activityConfig, dispatcher, &activity.RemoteWorkerBinder{Router: router}, b.sender, tally.NoopScope, logger),
		worker.NewLibrary(workerConfig, &worker.RemoteRescheduler{Router: router}, tally.NoopScope, logger),
	}
	b.host = historytest.Start(t, historytest.Options{
		Path: path, NumShards: hostNumShards, Libraries: libs, DynamicConfig: dcClient, Logger: logger,
		Services: func(e *history.Engine) []history.ServiceRegistration {
			b.activities = activity.NewHandler(e, activityConfig, tally.NoopScope, logger, activity.WithDispatcher(dispatcher))
			b.workers = worker.NewHandler(e, workerConfig, clock.NewRealTimeSource(), tally.NoopScope, logger)
			return []history.ServiceRegistration{func(s grpc.ServiceRegistrar) {
				activitypb.RegisterActivityHistoryServiceServer(s, b.activities)
				workerpb.RegisterWorkerHistoryServiceServer(s, b.workers)
				workerpb.RegisterActivityReschedulerServiceServer(s, worker.NewRescheduleServer(b.activities))
			}}
		},
	})
	membership.SetAddress(b.host.Server.Address())
	return b
}

// waitDispatch waits for the attempt with stamp to reach matching.
func (b *hostBundle) waitDispatch(activityID string, stamp int64) activity.ActivityTaskRef {
	b.t.Helper()
	var found activity.ActivityTaskRef
	require.Eventually(b.t, func() bool {
		for _, ref := range b.dispatcher.dispatched() {
			if ref.ActivityID == activityID && ref.Stamp == stamp {
				found = ref
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "activity %s stamp %d never reached matching", activityID, stamp)
	return found
}

func (b *hostBundle) startActivity(activityID string) string {
	b.t.Helper()
	resp, err := b.activities.StartActivity(context.Background(), startRequest(activityID))
	require.NoError(b.t, err)
	return resp.RunId
}

func (b *hostBundle) takeTask(ref activity.ActivityTaskRef, workerKey string) *activitypb.RecordActivityTaskStartedResponse {
	b.t.Helper()
	resp, err := b.activities.RecordActivityTaskStarted(context.Background(), &activitypb.RecordActivityTaskStartedRequest{
		NamespaceId: ref.NamespaceID, ActivityId: ref.ActivityID, RunId: ref.RunID, Stamp: ref.Stamp,
		Identity: "1@host", WorkerInstanceKey: workerKey, WorkerControlTaskQueue: testControlQueue, PollRequestId: workerKey,
	})
	require.NoError(b.t, err)
	return resp
}

func (b *hostBundle) waitResult(activityID, runID string) *activitypb.ActivityOutcome {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.activities.PollActivityExecution(ctx, &activitypb.PollActivityExecutionRequest{
		NamespaceId: testNamespaceID, ActivityId: activityID, RunId: runID,
	})
	require.NoError(b.t, err)
	require.NotNil(b.t, resp.Outcome)
	return resp.Outcome
}

func TestOnHistoryHost(t *testing.T) {
	t.Parallel()

	t.Run("StartDispatchCompletePollAndSurviveARestart", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "vigil.db")
		dispatcher := &recordingDispatcher{}
		b := startActivityHost(t, path, dispatcher)

		runID := b.startActivity("a1")
		task := b.takeTask(b.waitDispatch("a1", 1), "")
		require.Greater(t, task.StartToCloseTimeout.AsDuration(), time.Duration(0))
		_, err := b.activities.RespondActivityTaskCompleted(context.Background(), &activitypb.RespondActivityTaskCompletedRequest{
			NamespaceId: testNamespaceID, TaskToken: task.TaskToken, Result: payloads("one"),
		})
		require.NoError(t, err)
		require.True(t, proto.Equal(payloads("one"), b.waitResult("a1", runID).GetResult()))

		// a2 is running when the host goes down.
		run2 := b.startActivity("a2")
		task2 := b.takeTask(b.waitDispatch("a2", 1), "")
		b.host.Stop()

		b = startActivityHost(t, path, dispatcher)
		require.True(t, proto.Equal(payloads("one"), b.waitResult("a1", runID).GetResult()), "a1's outcome is durable")
		_, err = b.activities.RespondActivityTaskCompleted(context.Background(), &activitypb.RespondActivityTaskCompletedRequest{
			NamespaceId: testNamespaceID, TaskToken: task2.TaskToken, Result: payloads("two"),
		})
		require.NoError(t, err, "a2's attempt, stamp and token survived the restart")
		require.True(t, proto.Equal(payloads("two"), b.waitResult("a2", run2).GetResult()))
		// A retried start after the restart still finds its run.
		resp, err := b.activities.StartActivity(context.Background(), startRequest("a2"))
		require.NoError(t, err)
		require.Equal(t, run2, resp.RunId)
	})

	t.Run("AWorkerThatDiesLosesItsActivityToALiveWorkerWithinItsLease", func(t *testing.T) {
		t.Parallel()
		b := startActivityHost(t, filepath.Join(t.TempDir(), "vigil.db"), &recordingDispatcher{})
		beat := func(key string) {
			resp, err := b.workers.RecordHeartbeats(context.Background(), &workerpb.RecordHeartbeatsRequest{
				NamespaceId: testNamespaceID, Namespace: testNamespace,
				Heartbeats: []*workerpb.HeartbeatEntry{{
					Heartbeat:     &workerv1.WorkerHeartbeat{WorkerInstanceKey: key, TaskQueue: testTaskQueue},
					LeaseDuration: durationpb.New(time.Second),
				}},
			})
			require.NoError(t, err)
			require.Nil(t, resp.Results[0].Error)
		}
		beat("dying-worker")
		runID := b.startActivity("a1")
		dead := b.takeTask(b.waitDispatch("a1", 1), "dying-worker")

		// The worker stops heartbeating. Its lease runs out, the Worker component hands a1 back
		// to a1's shard, and a1 is dispatched again with a new stamp.
		started := time.Now()
		next := b.waitDispatch("a1", 2)
		t.Logf("attempt 2 dispatched %v after the last heartbeat", time.Since(started))
		require.Eventually(t, func() bool { return len(b.sender.sent()) == 1 }, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, dead.TaskToken, b.sender.sent()[0].TaskToken, "the lost worker is told to stop, in case it is only cut off")

		beat("live-worker")
		alive := b.takeTask(next, "live-worker")
		// Attempt 2 normally. On a starved machine the 1 s lease can run out before the bind
		// of attempt 1 lands; the bind is then refused and the attempt, which never ran, keeps
		// its number. Either way the new stamp is what fences the dead worker out.
		require.Contains(t, []int32{1, 2}, alive.Attempt)
		_, err := b.activities.RespondActivityTaskCompleted(context.Background(), &activitypb.RespondActivityTaskCompletedRequest{
			NamespaceId: testNamespaceID, TaskToken: dead.TaskToken, Result: payloads("zombie"),
		})
		requireNotFound(t, err)
		_, err = b.activities.RespondActivityTaskCompleted(context.Background(), &activitypb.RespondActivityTaskCompletedRequest{
			NamespaceId: testNamespaceID, TaskToken: alive.TaskToken, Result: payloads("alive"),
		})
		require.NoError(t, err)
		require.True(t, proto.Equal(payloads("alive"), b.waitResult("a1", runID).GetResult()))

		// The live worker's binding is removed on completion.
		require.Eventually(t, func() bool {
			resp, err := b.workers.DescribeWorker(context.Background(), &workerpb.DescribeWorkerRequest{
				NamespaceId: testNamespaceID, WorkerInstanceKey: "live-worker", IncludeBoundActivities: true,
			})
			return err == nil && len(resp.Worker.BoundActivities) == 0 && resp.Worker.State.BoundActivityCount == 0
		}, 10*time.Second, 5*time.Millisecond)
	})

	t.Run("ARescheduledAttemptMatchingLostIsQueuedAgainAfterARestart", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "vigil.db")
		dispatcher := &recordingDispatcher{}
		b := startActivityHost(t, path, dispatcher)
		runID := b.startActivity("a1")
		dead := b.takeTask(b.waitDispatch("a1", 1), "dying-worker")

		// Matching forgets every hand-off from now on, as when the process dies right after the
		// reschedule's commit: only history knows the new attempt.
		dispatcher.forget(true)
		resp, err := b.activities.RescheduleActivities(context.Background(), &workerpb.RescheduleActivitiesRequest{
			NamespaceId: testNamespaceID, WorkerInstanceKey: "dying-worker", Activities: []*workerpb.BoundActivity{entry("a1", runID, 1)},
		})
		require.NoError(t, err)
		require.Equal(t, []workerpb.RescheduleOutcome{rescheduled}, resp.Outcomes)
		b.host.Stop()

		restarted := &recordingDispatcher{}
		b = startActivityHost(t, path, restarted)
		n, err := activity.RequeueDispatched(context.Background(), b.host.Engine, b.host.Engine.Registry(), []string{testNamespaceID}, restarted)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		next := b.takeTask(b.waitDispatch("a1", 2), "live-worker")
		require.EqualValues(t, 2, next.Attempt)
		_, err = b.activities.RespondActivityTaskCompleted(context.Background(), &activitypb.RespondActivityTaskCompletedRequest{
			NamespaceId: testNamespaceID, TaskToken: dead.TaskToken, Result: payloads("zombie"),
		})
		requireNotFound(t, err)
	})
}
