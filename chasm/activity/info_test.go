package activity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// TestDescribeFillsAttemptTimes checks the ActivityExecutionInfo fields Temporal fills about
// attempts: when the last one ended, the backoff before the next, the start delay and when the
// first attempt was due.
func TestDescribeFillsAttemptTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	scheduled := b.engine.Now()
	runID := b.start("a1", withRetry(3*time.Second, 2, 0), func(r *activitypb.StartActivityRequest) {
		r.StartDelay = durationpb.New(0)
	})
	info := activity.ToActivityExecutionInfo("a1", runID, b.describe("a1"))
	require.Nil(t, info.GetLastAttemptCompleteTime(), "no attempt ended yet")
	require.Equal(t, scheduled, info.GetExecutionTime().AsTime())

	task := b.poll(b.dispatcher.last(t))
	b.engine.AdvanceTime(5 * time.Second)
	failedAt := b.engine.Now()
	require.NoError(t, b.fail(task.TaskToken, appFailure("Boom", false)))

	info = activity.ToActivityExecutionInfo("a1", runID, b.describe("a1"))
	require.Equal(t, failedAt, info.GetLastAttemptCompleteTime().AsTime())
	require.Equal(t, 3*time.Second, info.GetCurrentRetryInterval().AsDuration())
	require.Equal(t, failedAt.Add(3*time.Second), info.GetNextAttemptScheduleTime().AsTime())

	b.engine.AdvanceTime(3 * time.Second)
	b.runSideEffects()
	second := b.poll(b.dispatcher.last(t))
	info = activity.ToActivityExecutionInfo("a1", runID, b.describe("a1"))
	require.Nil(t, info.GetCurrentRetryInterval(), "the attempt runs")
	b.engine.AdvanceTime(time.Second)
	require.NoError(t, b.complete(second.TaskToken, "done"))
	info = activity.ToActivityExecutionInfo("a1", runID, b.describe("a1"))
	require.Equal(t, b.engine.Now(), info.GetLastAttemptCompleteTime().AsTime())
	require.Equal(t, b.engine.Now(), info.GetCloseTime().AsTime())
	require.Equal(t, b.engine.Now().Sub(scheduled), info.GetExecutionDuration().AsDuration())
}

func TestDescribeShowsTheStartDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	scheduled := b.engine.Now()
	runID := b.start("a1", func(r *activitypb.StartActivityRequest) { r.StartDelay = durationpb.New(time.Minute) })
	info := activity.ToActivityExecutionInfo("a1", runID, b.describe("a1"))
	require.Equal(t, time.Minute, info.GetStartDelay().AsDuration())
	require.Equal(t, scheduled.Add(time.Minute), info.GetExecutionTime().AsTime())
}
