package worker

import (
	"context"
	"slices"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/combine"
)

// newRescheduleAcks returns what records the acknowledgements of a worker's reschedule
// batches, several to a transaction. A worker's activities go out in one batch per
// destination shard, whose executors finish at about the same time; acknowledged one by one,
// they queued on the worker's lock and cost a write each (16 shards: 16 writes per dead
// worker). Combined per worker, the acknowledgements that arrive while one is being written go
// in the next write together. The engine comes from the ctx of the side-effect task.
func newRescheduleAcks() *combine.Combiner[chasm.ComponentRef, *workerpb.ActivityRescheduleTask] {
	return combine.New(func(ctx context.Context, ref chasm.ComponentRef, tasks []*workerpb.ActivityRescheduleTask) error {
		_, err := chasm.UpdateComponent(ctx, chasm.EngineFromContext(ctx), ref, func(_ chasm.MutableContext, w *Worker) (struct{}, error) {
			for _, task := range tasks {
				if i := pendingIndex(w, task); i >= 0 {
					w.PendingReschedules = slices.Delete(w.PendingReschedules, i, i+1)
				}
			}
			return struct{}{}, nil
		})
		return err
	})
}
