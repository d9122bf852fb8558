package activity_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// An attempt taken from a lost worker records the worker, when and why, so the liveness view
// can list what the worker's death moved; the record stays through the next attempts.
func TestLostWorkerIsRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startAndPoll("a1")
	ref := b.dispatcher.last(t)
	b.reschedule(testWorkerKey, entry("a1", ref.RunID, ref.Stamp))
	state := b.describe("a1")
	require.Equal(t, testWorkerKey, state.LostWorkerInstanceKey)
	require.Equal(t, "worker_inactive", state.LostWorkerReason)
	require.Equal(t, b.engine.Now(), state.LostWorkerTime.AsTime())

	// It runs elsewhere now; the record is kept.
	task, err := b.recordStarted(b.dispatcher.last(t), "worker-b", "poll-b")
	require.NoError(t, err)
	require.NoError(t, b.complete(task.TaskToken, "done"))
	state = b.describe("a1")
	require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_COMPLETED, state.Status)
	require.Equal(t, testWorkerKey, state.LostWorkerInstanceKey)

	// A refused bind records the worker too.
	b.binder.answer(activity.BindOutcomeWorkerNotActive)
	b.start("a2")
	_, err = b.recordStarted(b.dispatcher.last(t), "worker-c", "poll-c")
	require.NoError(t, err)
	b.runSideEffects()
	state = b.describe("a2")
	require.Equal(t, "worker-c", state.LostWorkerInstanceKey)
	require.Equal(t, "bind_refused", state.LostWorkerReason)
}
