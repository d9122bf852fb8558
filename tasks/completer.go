package tasks

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
)

// CompleterBatchSizeDefault caps the executed tasks deleted in one store call.
const CompleterBatchSizeDefault = 512

// completer deletes executed tasks in batches, off the scheduler's workers: with a store that
// fsyncs every transaction, deleting tasks one by one would cap a shard at one task per disk
// sync. A task leaves memory (done) only once its delete is durable, so the queue's view stays
// exactly what it was with synchronous deletes; a crash before the delete only means the task
// is read again on restart, where its validator finds it stale.
type completer[T any] struct {
	deleteBatch func(ctx context.Context, batch []T) error
	done        func(T)
	policy      retryPolicy
	ts          clock.TimeSource
	logger      *zap.Logger

	mu      sync.Mutex
	pending []T
	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

func newCompleter[T any](deleteBatch func(context.Context, []T) error, done func(T), policy retryPolicy, ts clock.TimeSource, logger *zap.Logger) *completer[T] {
	return &completer[T]{
		deleteBatch: deleteBatch, done: done, policy: policy, ts: ts, logger: logger,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
}

// add queues an executed task for deletion.
func (c *completer[T]) add(item T) {
	c.mu.Lock()
	c.pending = append(c.pending, item)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *completer[T]) start(ctx context.Context) {
	go func() {
		defer close(c.stopped)
		attempt := 0
		for {
			c.mu.Lock()
			n := min(len(c.pending), CompleterBatchSizeDefault)
			batch := append([]T(nil), c.pending[:n]...)
			c.mu.Unlock()
			if n == 0 {
				select {
				case <-c.wake:
					continue
				case <-c.stop:
					return
				}
			}
			if err := c.deleteBatch(ctx, batch); err != nil {
				if ctx.Err() != nil {
					return // stopping: what is not deleted is read again by the next owner
				}
				attempt++
				c.logger.Warn("deleting executed tasks failed; will retry", zap.Int("tasks", n), zap.Int("attempt", attempt), zap.Error(err))
				timerC, timer := c.ts.NewTimer(c.policy.backoff(attempt))
				select {
				case <-timerC:
				case <-c.stop:
					timer.Stop()
					return
				}
				continue
			}
			attempt = 0
			c.mu.Lock()
			c.pending = c.pending[n:]
			c.mu.Unlock()
			for _, item := range batch {
				c.done(item)
			}
		}
	}()
}

// halt stops the loop and waits for it; undeleted tasks stay in the store.
func (c *completer[T]) halt() {
	close(c.stop)
	<-c.stopped
}
