package frontend

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"
	"google.golang.org/protobuf/types/known/timestamppb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// The liveness view of a dead worker lists the activities its loss moved, latest first, with
// where each is now; activities moved from other workers, or never moved, are not listed.
func TestDescribeWorkerLivenessListsMovedActivities(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	at := func(s int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2025, 1, 1, 0, 0, s, 0, time.UTC))
	}
	activities := []*activitypb.ListedActivity{
		{ActivityId: "moved-running", RunId: "r1", State: &activitypb.ActivityState{
			Status: activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, Attempt: 2,
			WorkerInstanceKey: "w-2", WorkerIdentity: "2@host-b",
			LostWorkerInstanceKey: "w-1", LostWorkerTime: at(1), LostWorkerReason: "worker_inactive",
		}},
		{ActivityId: "moved-done", RunId: "r2", State: &activitypb.ActivityState{
			Status: activitypb.ActivityStatus_ACTIVITY_STATUS_COMPLETED, Attempt: 2,
			LostWorkerInstanceKey: "w-1", LostWorkerTime: at(2), LostWorkerReason: "worker_inactive",
		}},
		{ActivityId: "moved-elsewhere", RunId: "r3", State: &activitypb.ActivityState{
			Status: activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED, LostWorkerInstanceKey: "w-9", LostWorkerTime: at(3),
		}},
		{ActivityId: "never-moved", RunId: "r4", State: &activitypb.ActivityState{Status: activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED}},
	}
	env.history.EXPECT().ListActivities(gomock.Any(), gomock.Any()).Return(&activitypb.ListActivitiesResponse{Activities: activities}, nil)
	env.history.EXPECT().DescribeWorker(gomock.Any(), gomock.Any()).Return(&workerpb.DescribeWorkerResponse{
		Worker: record("w-1", workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, 0),
	}, nil)

	resp, err := env.liveness.DescribeWorkerLiveness(context.Background(), &livenesspb.DescribeWorkerLivenessRequest{
		Namespace: testNamespace, WorkerInstanceKey: "w-1", IncludeMovedActivities: true,
	})
	require.NoError(t, err)
	moved := resp.GetMovedActivities()
	require.Len(t, moved, 2)
	require.Equal(t, "moved-done", moved[0].GetActivityId(), "latest first")
	require.Equal(t, "Completed", moved[0].GetStatus())
	require.Empty(t, moved[0].GetWorkerInstanceKey())
	require.Equal(t, "moved-running", moved[1].GetActivityId())
	require.Equal(t, "Running", moved[1].GetStatus())
	require.Equal(t, "Started", moved[1].GetRunState())
	require.EqualValues(t, 2, moved[1].GetAttempt())
	require.Equal(t, "w-2", moved[1].GetWorkerInstanceKey(), "where it runs now")
	require.Equal(t, "worker_inactive", moved[1].GetReason())
	require.Equal(t, at(1).AsTime(), moved[1].GetMovedTime().AsTime())
}
