package frontend

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// fakeActivityPages serves n activities from history in pages of the requested size; every
// third one is on task queue "b", the others on "a"; the first is STARTED by worker w-1.
func fakeActivityPages(t *testing.T, env *testEnv, n int) {
	all := make([]*activitypb.ListedActivity, n)
	for i := range all {
		tq := "a"
		if i%3 == 2 {
			tq = "b"
		}
		st := activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED
		worker := ""
		if i == 0 {
			st, worker = activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, "w-1"
		}
		all[i] = &activitypb.ListedActivity{ActivityId: fmt.Sprintf("act-%02d", i), RunId: "r", State: &activitypb.ActivityState{
			Status: st, TaskQueue: tq, ActivityType: &commonpb.ActivityType{Name: "Charge"}, WorkerInstanceKey: worker,
		}}
	}
	env.history.EXPECT().ListActivities(gomock.Any(), gomock.Any()).AnyTimes().DoAndReturn(
		func(_ context.Context, req *activitypb.ListActivitiesRequest) (*activitypb.ListActivitiesResponse, error) {
			require.Equal(t, env.ns.ID, req.GetNamespaceId())
			start := 0
			if len(req.GetNextPageToken()) > 0 {
				_, _ = fmt.Sscanf(string(req.GetNextPageToken()), "%d", &start)
			}
			end := min(start+int(req.GetPageSize()), n)
			resp := &activitypb.ListActivitiesResponse{Activities: all[start:end]}
			if end < n {
				resp.NextPageToken = []byte(fmt.Sprint(end))
			}
			return resp, nil
		})
}

func TestListActivityExecutions(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	fakeActivityPages(t, env, 10)
	ctx := context.Background()

	// Pages of 2 through a filter that drops a third of history's rows: nothing skipped or
	// repeated.
	var ids []string
	var token []byte
	for {
		resp, err := env.workflow.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{
			Namespace: testNamespace, PageSize: 2, Query: `TaskQueue = "a"`, NextPageToken: token})
		require.NoError(t, err)
		require.LessOrEqual(t, len(resp.GetExecutions()), 2)
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetActivityId())
			require.Equal(t, enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING, e.GetStatus())
			require.NotNil(t, e.GetSearchAttributes())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	require.Equal(t, []string{"act-00", "act-01", "act-03", "act-04", "act-06", "act-07", "act-09"}, ids)

	count, err := env.workflow.CountActivityExecutions(ctx, &workflowservice.CountActivityExecutionsRequest{Namespace: testNamespace, Query: `TaskQueue = "b"`})
	require.NoError(t, err)
	require.EqualValues(t, 3, count.GetCount())
	count, err = env.workflow.CountActivityExecutions(ctx, &workflowservice.CountActivityExecutionsRequest{Namespace: testNamespace, Query: `WorkerInstanceKey = "w-1"`})
	require.NoError(t, err)
	require.EqualValues(t, 1, count.GetCount())

	_, err = env.workflow.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{Namespace: testNamespace, Query: `Bogus = "1"`})
	var invalid *serviceerror.InvalidArgument
	require.ErrorAs(t, err, &invalid)
	// A token of another query is refused.
	first, err := env.workflow.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{Namespace: testNamespace, PageSize: 2})
	require.NoError(t, err)
	require.NotEmpty(t, first.GetNextPageToken())
	_, err = env.workflow.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{
		Namespace: testNamespace, PageSize: 2, Query: `TaskQueue = "b"`, NextPageToken: first.GetNextPageToken()})
	require.Equal(t, codes.InvalidArgument, status.Code(serviceerror.ToStatus(err).Err()), "%v", err)
}
