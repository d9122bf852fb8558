package activity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm/activity"
)

func TestConversionsToThePublicAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.startAndPoll("a1", withTimeouts(time.Hour, 0, 0, 0))

	poll := activity.ToPollActivityTaskQueueResponse(task)
	require.Equal(t, task.TaskToken, poll.TaskToken)
	require.Equal(t, testNamespace, poll.WorkflowNamespace)
	require.Equal(t, task.ActivityRunId, poll.ActivityRunId)
	require.Nil(t, poll.WorkflowExecution, "a workflow execution would put the SDK in workflow-activity mode")
	require.Equal(t, time.Hour, poll.StartToCloseTimeout.AsDuration())

	info := activity.ToActivityExecutionInfo("a1", task.ActivityRunId, b.describe("a1"))
	require.Equal(t, enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING, info.Status)
	require.Equal(t, enumspb.PENDING_ACTIVITY_STATE_STARTED, info.RunState)
	require.EqualValues(t, 1, info.Attempt)

	require.Nil(t, activity.ToActivityExecutionOutcome(nil), "no outcome while open")
	require.NoError(t, b.complete(task.TaskToken, "ok"))
	state := b.describe("a1")
	info = activity.ToActivityExecutionInfo("a1", task.ActivityRunId, state)
	require.Equal(t, enumspb.ACTIVITY_EXECUTION_STATUS_COMPLETED, info.Status)
	require.True(t, proto.Equal(payloads("ok"), activity.ToActivityExecutionOutcome(state.Outcome).GetResult()))
}
