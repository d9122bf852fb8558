package worker

import (
	"context"
	"slices"
	"sync"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// rescheduleAcks records the acknowledgements of a worker's reschedule batches, several to a
// transaction. A worker's activities go out in one batch per destination shard, whose
// executors finish at about the same time; acknowledged one by one, they queued on the
// worker's lock and cost a write each (16 shards: 16 writes per dead worker). Here the first
// executor to find none of its worker's acknowledgements in flight writes what is queued, and
// the acknowledgements that arrive meanwhile go in the next write together.
type rescheduleAcks struct {
	mu     sync.Mutex
	groups map[chasm.ComponentRef]*ackGroup
}

type ackGroup struct {
	queued  []*ackCall
	running bool
}

type ackCall struct {
	task *workerpb.ActivityRescheduleTask
	done chan error // buffered: a round never blocks on a caller that stopped waiting
}

// ack removes task from the worker's pending reschedules and returns once that is durable (or
// when ctx ends; the removal may still happen).
func (a *rescheduleAcks) ack(ctx context.Context, ref chasm.ComponentRef, task *workerpb.ActivityRescheduleTask) error {
	call := &ackCall{task: task, done: make(chan error, 1)}
	a.mu.Lock()
	if a.groups == nil {
		a.groups = make(map[chasm.ComponentRef]*ackGroup)
	}
	g := a.groups[ref]
	if g == nil {
		g = &ackGroup{}
		a.groups[ref] = g
	}
	g.queued = append(g.queued, call)
	lead := !g.running
	g.running = true
	a.mu.Unlock()
	if lead {
		a.runRounds(context.WithoutCancel(ctx), ref, g, call)
	}
	select {
	case err := <-call.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runRounds writes the queued acknowledgements of one worker, a round per transaction, until
// mine (nil: all) is answered, and leaves the rest to a goroutine. The engine comes from ctx,
// which carries it for side-effect tasks.
func (a *rescheduleAcks) runRounds(ctx context.Context, ref chasm.ComponentRef, g *ackGroup, mine *ackCall) {
	for {
		a.mu.Lock()
		round := g.queued
		g.queued = nil
		if len(round) == 0 {
			g.running = false
			delete(a.groups, ref)
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		_, err := chasm.UpdateComponent(ctx, chasm.EngineFromContext(ctx), ref, func(_ chasm.MutableContext, w *Worker) (struct{}, error) {
			for _, call := range round {
				if i := pendingIndex(w, call.task); i >= 0 {
					w.PendingReschedules = slices.Delete(w.PendingReschedules, i, i+1)
				}
			}
			return struct{}{}, nil
		})
		answered := false
		for _, call := range round {
			call.done <- err
			answered = answered || call == mine
		}
		if answered {
			a.mu.Lock()
			if len(g.queued) == 0 {
				g.running = false
				delete(a.groups, ref)
				a.mu.Unlock()
				return
			}
			a.mu.Unlock()
			go a.runRounds(ctx, ref, g, nil)
			return
		}
	}
}
