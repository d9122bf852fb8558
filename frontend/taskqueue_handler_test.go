//lint:file-ignore SA1019 the API marks DescribeTaskQueue's modes deprecated, but the temporal CLI
// and the SDKs still send them, and Temporal's server still answers them.

package frontend

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/mock/gomock"

	"github.com/vigilhq/vigil/matching"
)

// newTaskQueueEnv is a handler whose matching is a mock that describes "payments".
func newTaskQueueEnv(t *testing.T) (*testEnv, *MockMatching, matching.QueueDescription) {
	t.Helper()
	e := newTestEnv(t)
	m := NewMockMatching(gomock.NewController(t))
	e.deps.Matching = m
	e.workflow = NewWorkflowHandler(e.deps)
	seen := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	d := matching.QueueDescription{
		Pollers: []matching.Poller{
			{Identity: "a@host", WorkerInstanceKey: "w-1", LastAccessTime: seen, RatePerSecond: 25},
			{Identity: "b@host", WorkerInstanceKey: "w-2", LastAccessTime: seen.Add(time.Second)},
		},
		BacklogCount: 7, BacklogAge: 90 * time.Second, TasksAddRate: 2, TasksDispatchRate: 0.5, Owner: "host-2",
	}
	m.EXPECT().DescribeActivityQueue(gomock.Any(), e.ns.ID, "payments").AnyTimes().Return(d, nil)
	return e, m, d
}

func TestDescribeTaskQueueEnhanced(t *testing.T) {
	t.Parallel()

	t.Run("AsTheCLIAsks", func(t *testing.T) {
		t.Parallel()
		e, _, d := newTaskQueueEnv(t)
		resp, err := e.workflow.DescribeTaskQueue(context.Background(), &workflowservice.DescribeTaskQueueRequest{
			Namespace: testNamespace, TaskQueue: &taskqueuepb.TaskQueue{Name: "payments", Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			ApiMode: enumspb.DESCRIBE_TASK_QUEUE_MODE_ENHANCED, ReportPollers: true, ReportStats: true,
		})
		require.NoError(t, err)
		require.Len(t, resp.GetVersionsInfo(), 1, "the unversioned queue only")
		types := resp.GetVersionsInfo()[""].GetTypesInfo()
		require.Len(t, types, 2, "workflow and activity by default")

		activity := types[int32(enumspb.TASK_QUEUE_TYPE_ACTIVITY)]
		require.Len(t, activity.GetPollers(), 2)
		require.Equal(t, "a@host", activity.GetPollers()[0].GetIdentity())
		require.Equal(t, d.Pollers[0].LastAccessTime, activity.GetPollers()[0].GetLastAccessTime().AsTime())
		require.Equal(t, 25.0, activity.GetPollers()[0].GetRatePerSecond())
		require.Equal(t, float64(defaultPollerRatePerSecond), activity.GetPollers()[1].GetRatePerSecond(),
			"a worker that set no limit is shown with Temporal's default")
		stats := activity.GetStats()
		require.EqualValues(t, 7, stats.GetApproximateBacklogCount())
		require.Equal(t, 90*time.Second, stats.GetApproximateBacklogAge().AsDuration())
		require.EqualValues(t, 2, stats.GetTasksAddRate())
		require.EqualValues(t, 0.5, stats.GetTasksDispatchRate())

		workflow := types[int32(enumspb.TASK_QUEUE_TYPE_WORKFLOW)]
		require.Empty(t, workflow.GetPollers(), "vigil serves no workflow tasks")
		require.NotNil(t, workflow.GetStats())
		require.Zero(t, workflow.GetStats().GetApproximateBacklogCount())
	})

	t.Run("OnlyWhatIsAskedFor", func(t *testing.T) {
		t.Parallel()
		e, _, _ := newTaskQueueEnv(t)
		resp, err := e.workflow.DescribeTaskQueue(context.Background(), &workflowservice.DescribeTaskQueueRequest{
			Namespace: testNamespace, TaskQueue: &taskqueuepb.TaskQueue{Name: "payments"},
			ApiMode:        enumspb.DESCRIBE_TASK_QUEUE_MODE_ENHANCED,
			TaskQueueTypes: []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_ACTIVITY},
			Versions:       &taskqueuepb.TaskQueueVersionSelection{Unversioned: true, AllActive: true},
			ReportPollers:  true, ReportTaskReachability: true,
		})
		require.NoError(t, err)
		version := resp.GetVersionsInfo()[""]
		require.Len(t, version.GetTypesInfo(), 1)
		activity := version.GetTypesInfo()[int32(enumspb.TASK_QUEUE_TYPE_ACTIVITY)]
		require.Len(t, activity.GetPollers(), 2)
		require.Nil(t, activity.GetStats(), "stats were not asked for")
		require.Equal(t, enumspb.BUILD_ID_TASK_REACHABILITY_REACHABLE, version.GetTaskReachability())
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		e, _, _ := newTaskQueueEnv(t)
		for name, req := range map[string]*workflowservice.DescribeTaskQueueRequest{
			"BuildID":   {Versions: &taskqueuepb.TaskQueueVersionSelection{BuildIds: []string{"v2"}}},
			"Sticky":    {TaskQueue: &taskqueuepb.TaskQueue{Name: "payments", Kind: enumspb.TASK_QUEUE_KIND_STICKY}},
			"Partition": {TaskQueue: &taskqueuepb.TaskQueue{Name: "/_sys/payments/1"}},
			"NoName":    {TaskQueue: &taskqueuepb.TaskQueue{}},
			"BadType":   {TaskQueueTypes: []enumspb.TaskQueueType{99}},
		} {
			req.Namespace, req.ApiMode = testNamespace, enumspb.DESCRIBE_TASK_QUEUE_MODE_ENHANCED
			if req.TaskQueue == nil {
				req.TaskQueue = &taskqueuepb.TaskQueue{Name: "payments"}
			}
			_, err := e.workflow.DescribeTaskQueue(context.Background(), req)
			var invalid *serviceerror.InvalidArgument
			require.ErrorAs(t, err, &invalid, name)
		}
		_, err := e.workflow.DescribeTaskQueue(context.Background(), &workflowservice.DescribeTaskQueueRequest{
			Namespace: "nope", TaskQueue: &taskqueuepb.TaskQueue{Name: "payments"}, ApiMode: enumspb.DESCRIBE_TASK_QUEUE_MODE_ENHANCED,
		})
		var notFound *serviceerror.NamespaceNotFound
		require.ErrorAs(t, err, &notFound)
	})
}

func TestDescribeTaskQueueLegacy(t *testing.T) {
	t.Parallel()

	t.Run("ActivityQueue", func(t *testing.T) {
		t.Parallel()
		e, _, _ := newTaskQueueEnv(t)
		resp, err := e.workflow.DescribeTaskQueue(context.Background(), &workflowservice.DescribeTaskQueueRequest{
			Namespace: testNamespace, TaskQueue: &taskqueuepb.TaskQueue{Name: "payments"},
			TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY, IncludeTaskQueueStatus: true, ReportStats: true, ReportConfig: true,
		})
		require.NoError(t, err)
		require.Len(t, resp.GetPollers(), 2)
		require.EqualValues(t, 7, resp.GetTaskQueueStatus().GetBacklogCountHint())
		require.EqualValues(t, 7, resp.GetStats().GetApproximateBacklogCount())
		require.NotNil(t, resp.GetConfig())
		require.Nil(t, resp.GetVersionsInfo())
	})

	t.Run("WorkflowQueueByDefault", func(t *testing.T) {
		t.Parallel()
		e, _, _ := newTaskQueueEnv(t)
		resp, err := e.workflow.DescribeTaskQueue(context.Background(), &workflowservice.DescribeTaskQueueRequest{
			Namespace: testNamespace, TaskQueue: &taskqueuepb.TaskQueue{Name: "payments"}, IncludeTaskQueueStatus: true,
		})
		require.NoError(t, err)
		require.Empty(t, resp.GetPollers())
		require.NotNil(t, resp.GetTaskQueueStatus(), "the CLI reads it without a nil check")
		require.Zero(t, resp.GetTaskQueueStatus().GetBacklogCountHint())
		require.Nil(t, resp.GetStats())
	})

	t.Run("MatchingErrors", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t)
		m := NewMockMatching(gomock.NewController(t))
		e.deps.Matching = m
		e.workflow = NewWorkflowHandler(e.deps)
		m.EXPECT().DescribeActivityQueue(gomock.Any(), gomock.Any(), "stopping").Return(matching.QueueDescription{}, matching.ErrStopped)
		m.EXPECT().DescribeActivityQueue(gomock.Any(), gomock.Any(), "moving").Return(matching.QueueDescription{},
			serviceerror.NewUnavailable("task queue \"moving\" is changing hosts"))
		for _, q := range []string{"stopping", "moving"} {
			_, err := e.workflow.DescribeTaskQueue(context.Background(), &workflowservice.DescribeTaskQueueRequest{
				Namespace: testNamespace, TaskQueue: &taskqueuepb.TaskQueue{Name: q}, TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
			})
			var unavailable *serviceerror.Unavailable
			require.True(t, errors.As(err, &unavailable), "%s: %v", q, err)
		}
	})
}

func TestListTaskQueuePartitions(t *testing.T) {
	t.Parallel()
	e, _, _ := newTaskQueueEnv(t)
	resp, err := e.workflow.ListTaskQueuePartitions(context.Background(), &workflowservice.ListTaskQueuePartitionsRequest{
		Namespace: testNamespace, TaskQueue: &taskqueuepb.TaskQueue{Name: "payments"},
	})
	require.NoError(t, err)
	require.Len(t, resp.GetActivityTaskQueuePartitions(), 1)
	require.Equal(t, "payments", resp.GetActivityTaskQueuePartitions()[0].GetKey())
	require.Equal(t, "host-2", resp.GetActivityTaskQueuePartitions()[0].GetOwnerHostName())
	require.Empty(t, resp.GetWorkflowTaskQueuePartitions())
}
