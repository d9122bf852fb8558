package worker

import (
	"context"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// ActivityRescheduler hands a batch of a dead worker's activities to the shard that owns them
// (req.ShardId). The destination applies an entry only if that activity is still started by
// this worker with the same stamp, and answers one outcome per entry. Implementations:
// RemoteRescheduler (the history RPC, through the shard router) and, on the receiving side,
// whatever the activity component registers; NotFoundRescheduler until it exists.
type ActivityRescheduler interface {
	RescheduleActivities(ctx context.Context, req *workerpb.RescheduleActivitiesRequest) (*workerpb.RescheduleActivitiesResponse, error)
}

// NotFoundRescheduler answers NOT_FOUND for every entry: the receiving side when no activity
// component is registered. The worker side counts NOT_FOUND as done.
type NotFoundRescheduler struct{}

// RescheduleActivities implements ActivityRescheduler.
func (NotFoundRescheduler) RescheduleActivities(_ context.Context, req *workerpb.RescheduleActivitiesRequest) (*workerpb.RescheduleActivitiesResponse, error) {
	outcomes := make([]workerpb.RescheduleOutcome, len(req.GetActivities()))
	for i := range outcomes {
		outcomes[i] = workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_NOT_FOUND
	}
	return &workerpb.RescheduleActivitiesResponse{Outcomes: outcomes}, nil
}
