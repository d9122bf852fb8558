package worker

import (
	"context"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/combine"
)

// rescheduleOutcome is what became of one reschedule batch: its shard took it (delivered), or
// the fan-out that carried it could not deliver it and hands it to a task of its own.
type rescheduleOutcome struct {
	batch     *workerpb.ActivityRescheduleTask
	delivered bool
}

// rescheduleAcks records the outcomes of a worker's reschedule batches.
type rescheduleAcks = combine.Combiner[chasm.ComponentRef, []rescheduleOutcome]

// newRescheduleAcks returns what records the outcomes of a worker's reschedule batches,
// several to a transaction. The executors of one worker's tasks (its fan-outs, and the
// batches handed to tasks of their own) finish at about the same time; recorded one by one,
// they queued on the worker's lock and cost a write each. Combined per worker, the outcomes
// that arrive while one is being written go in the next write together. The engine comes
// from the ctx of the side-effect task.
func newRescheduleAcks() *rescheduleAcks {
	return combine.New(func(ctx context.Context, ref chasm.ComponentRef, items [][]rescheduleOutcome) error {
		_, err := chasm.UpdateComponent(ctx, chasm.EngineFromContext(ctx), ref, func(mctx chasm.MutableContext, w *Worker) (struct{}, error) {
			for _, outcomes := range items {
				for _, o := range outcomes {
					recordOutcome(w, mctx, o)
				}
			}
			return struct{}{}, nil
		})
		return err
	})
}

// recordOutcome acknowledges a delivered batch (it leaves pending_reschedules), and hands an
// undelivered one still pending to an ActivityRescheduleTask of its own, once.
func recordOutcome(w *Worker, ctx chasm.MutableContext, o rescheduleOutcome) {
	i := pendingIndex(w, o.batch)
	switch {
	case i < 0:
	case o.delivered:
		w.PendingReschedules = slices.Delete(w.PendingReschedules, i, i+1)
	case !w.PendingReschedules[i].OwnTask:
		// Replaced, not changed in place: the committed state shares it (chasm.WithCopyOnWrite).
		p := proto.CloneOf(w.PendingReschedules[i])
		p.OwnTask = true
		w.PendingReschedules[i] = p
		ctx.AddTask(chasm.TaskAttributes{Destination: RescheduleDestination(o.batch.DestinationShard)}, o.batch)
	}
}
