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
	"github.com/vigilhq/vigil/common/visibility"
)

// fakeVisibilityHistory answers ListActivities as a store with visibility tables would: it
// checks that the frontend sent the visibility query want, serves n activities in pages of
// the requested size (the token is the next position), and answers a count with counts.
func fakeVisibilityHistory(t *testing.T, env *testEnv, n int, want *visibility.Query, counts map[int32]int64) {
	all := make([]*activitypb.ListedActivity, n)
	for i := range all {
		all[i] = &activitypb.ListedActivity{ActivityId: fmt.Sprintf("act-%02d", i), RunId: "r", State: &activitypb.ActivityState{
			Status: activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED, TaskQueue: "a", ActivityType: &commonpb.ActivityType{Name: "Charge"},
			StateTransitionCount: int64(i + 1),
		}}
	}
	env.history.EXPECT().ListActivities(gomock.Any(), gomock.Any()).AnyTimes().DoAndReturn(
		func(_ context.Context, req *activitypb.ListActivitiesRequest) (*activitypb.ListActivitiesResponse, error) {
			require.Equal(t, env.ns.ID, req.GetNamespaceId())
			got, err := visibility.DecodeQuery(req.GetVisibilityQuery())
			require.NoError(t, err)
			require.Equal(t, want, got)
			if req.GetCountOnly() {
				var total int64
				for _, c := range counts {
					total += c
				}
				return &activitypb.ListActivitiesResponse{Count: total, StatusCounts: counts}, nil
			}
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
	taskQueueA := &visibility.Query{Where: &visibility.Expr{Op: visibility.OpCompare, Cmp: "=",
		Field: visibility.Field{Column: visibility.ColumnTaskQueue}, Values: []visibility.Value{{S: "a"}}}}
	fakeVisibilityHistory(t, env, 7, taskQueueA, map[int32]int64{
		int32(enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING): 5, int32(enumspb.ACTIVITY_EXECUTION_STATUS_COMPLETED): 2})
	ctx := context.Background()

	// The query goes to the store compiled; its pages and tokens come back whole.
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
			var i int64
			_, err := fmt.Sscanf(e.GetActivityId(), "act-%d", &i)
			require.NoError(t, err)
			require.Equal(t, i+1, e.GetStateTransitionCount(), "from the listed state")
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	require.Equal(t, []string{"act-00", "act-01", "act-02", "act-03", "act-04", "act-05", "act-06"}, ids)

	count, err := env.workflow.CountActivityExecutions(ctx, &workflowservice.CountActivityExecutionsRequest{
		Namespace: testNamespace, Query: `TaskQueue = "a" GROUP BY ExecutionStatus`})
	require.NoError(t, err)
	require.EqualValues(t, 7, count.GetCount())
	require.Len(t, count.GetGroups(), 2)
	require.Equal(t, `"Running"`, string(count.GetGroups()[0].GetGroupValues()[0].GetData()))
	require.EqualValues(t, 5, count.GetGroups()[0].GetCount())
	require.Equal(t, `"Completed"`, string(count.GetGroups()[1].GetGroupValues()[0].GetData()))

	var invalid *serviceerror.InvalidArgument
	_, err = env.workflow.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{Namespace: testNamespace, Query: `Bogus = "1"`})
	require.ErrorAs(t, err, &invalid)
	_, err = env.workflow.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{Namespace: testNamespace, Query: "TaskQueue = \"a\x00\""})
	require.ErrorAs(t, err, &invalid)
	// A token of another query is refused.
	first, err := env.workflow.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{
		Namespace: testNamespace, PageSize: 2, Query: `TaskQueue = "a"`})
	require.NoError(t, err)
	require.NotEmpty(t, first.GetNextPageToken())
	_, err = env.workflow.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{
		Namespace: testNamespace, PageSize: 2, Query: `TaskQueue = "b"`, NextPageToken: first.GetNextPageToken()})
	require.Equal(t, codes.InvalidArgument, status.Code(serviceerror.ToStatus(err).Err()), "%v", err)
}
