package activity

import (
	"context"
	"fmt"

	"github.com/vigilhq/vigil/chasm"
)

// RequeueDispatched hands matching again every attempt that was queued there before a restart.
// Matching keeps its queues in memory only; history is the source of truth, so on start the
// server walks the SCHEDULED activities of each namespace and re-queues those already
// dispatched (the others still have their DispatchTask pending and dispatch themselves).
// "Dispatched" includes a rescheduled attempt whose dispatch was recorded in the reschedule's
// own transaction, to be handed to matching right after its commit: whether or not the
// process lived long enough to hand it over, it is queued here (see
// Handler.RescheduleActivities). It returns how many it re-queued.
func RequeueDispatched(ctx context.Context, lister chasm.Lister, registry *chasm.Registry, namespaceIDs []string, d Dispatcher) (int, error) {
	requeued := 0
	for _, ns := range namespaceIDs {
		var token []byte
		for {
			page, next, err := chasm.ListComponents[*Activity](ctx, lister, registry, ns,
				chasm.IndexedFields{Status: StatusName(statusScheduled)}, 1000, token)
			if err != nil {
				return requeued, fmt.Errorf("list scheduled activities of namespace %s: %w", ns, err)
			}
			for _, l := range page {
				a := l.Component
				if a.Status != statusScheduled || a.DispatchedStamp < a.Stamp {
					continue
				}
				if err := d.AddActivityTask(ctx, activityTaskRef(l.Key, a)); err != nil {
					return requeued, err
				}
				requeued++
			}
			if token = next; token == nil {
				break
			}
		}
	}
	return requeued, nil
}
