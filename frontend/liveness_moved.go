package frontend

import (
	"context"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/frontend/query"
)

// MovedActivitiesMax bounds the moved activities one DescribeWorkerLiveness lists (the latest).
const MovedActivitiesMax = 1000

// movedActivities lists the activities whose attempt was last taken from the worker because it
// was lost, latest first, with where each is now. Every activity records the worker it was
// last taken from (chasm/activity, lost_worker_*), so this is a scan of the namespace's
// activities: the request asks for it explicitly.
func movedActivities(ctx context.Context, history HistoryClient, ns *namespace.Namespace, workerInstanceKey string) ([]*livenesspb.MovedActivity, error) {
	var out []*livenesspb.MovedActivity
	err := scanActivities(ctx, history, ns, func(l *activitypb.ListedActivity) {
		s := l.GetState()
		if s.GetLostWorkerInstanceKey() != workerInstanceKey || workerInstanceKey == "" {
			return
		}
		info := activity.ToActivityExecutionInfo(l.GetActivityId(), l.GetRunId(), s)
		m := &livenesspb.MovedActivity{
			ActivityId: l.GetActivityId(), RunId: l.GetRunId(), MovedTime: s.GetLostWorkerTime(), Reason: s.GetLostWorkerReason(),
			Status: query.ActivityStatusName(info.GetStatus()), Attempt: s.GetAttempt(),
		}
		if info.GetStatus() == enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING {
			m.RunState = info.GetRunState().String()
		}
		if s.GetStatus() == activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED {
			m.WorkerInstanceKey, m.WorkerIdentity = s.GetWorkerInstanceKey(), s.GetWorkerIdentity()
		}
		out = append(out, m)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *livenesspb.MovedActivity) int {
		return b.GetMovedTime().AsTime().Compare(a.GetMovedTime().AsTime())
	})
	if len(out) > MovedActivitiesMax {
		out = out[:MovedActivitiesMax]
	}
	return out, nil
}
