package tasks

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vigilhq/vigil/common/clock"
)

// readFits reports whether a read is worth doing with inMemory of maxInMemory tasks held. When
// the store is known to hold more (moreToRead), it waits for room for a page, or half the cap if
// that is smaller, so memory is refilled in batches.
func readFits(moreToRead bool, inMemory, maxInMemory, pageSize int) bool {
	room := maxInMemory - inMemory
	if room <= 0 {
		return false
	}
	return !moreToRead || room >= min(pageSize, max(maxInMemory/2, 1))
}

// recentSet remembers the last size keys added, forgetting the oldest first. The queues use it
// for recently completed tasks: a read that raced with a completion, or a notification that
// arrived late, must not run a finished task again. Bounded, so a long-lived queue does not grow;
// a key forgotten long ago can only come back through a very late duplicate, which the task's
// validator turns into a no-op.
type recentSet[K comparable] struct {
	ring []K
	next int
	n    int
	has  map[K]struct{}
}

func newRecentSet[K comparable](size int) *recentSet[K] {
	return &recentSet[K]{ring: make([]K, size), has: make(map[K]struct{}, size)}
}

func (s *recentSet[K]) add(k K) {
	if _, ok := s.has[k]; ok {
		return
	}
	if s.n == len(s.ring) {
		delete(s.has, s.ring[s.next])
	} else {
		s.n++
	}
	s.ring[s.next] = k
	s.next = (s.next + 1) % len(s.ring)
	s.has[k] = struct{}{}
}

func (s *recentSet[K]) contains(k K) bool {
	_, ok := s.has[k]
	return ok
}

// rearmableTimer is a TimeSource timer owned by one loop goroutine, re-created only when its
// deadline changes.
type rearmableTimer struct {
	ts       clock.TimeSource
	c        <-chan time.Time
	timer    clock.Timer
	deadline time.Time
}

// arm makes the timer fire at deadline (zero = never) and returns the channel to wait on (nil
// blocks forever, which is what a select wants for "no timer").
func (t *rearmableTimer) arm(deadline time.Time) <-chan time.Time {
	if t.c != nil && deadline.Equal(t.deadline) {
		return t.c
	}
	t.disarm()
	if deadline.IsZero() {
		return nil
	}
	t.c, t.timer = t.ts.NewTimerAt(deadline)
	t.deadline = deadline
	return t.c
}

// fired forgets a timer whose channel has delivered, so the next arm creates a new one.
func (t *rearmableTimer) fired() {
	t.c, t.timer, t.deadline = nil, nil, time.Time{}
}

func (t *rearmableTimer) disarm() {
	if t.timer != nil {
		t.timer.Stop()
	}
	t.fired()
}

// jobTracker counts a queue's jobs that are executing, so Stop can wait for them. Jobs still
// queued in the scheduler are not waited for: they may sit behind other shards' work, and when
// they do run after Stop they return at once without touching the task.
type jobTracker struct {
	mu      sync.Mutex
	idle    *sync.Cond
	running int
	stopped bool
}

func newJobTracker() *jobTracker {
	t := &jobTracker{}
	t.idle = sync.NewCond(&t.mu)
	return t
}

// begin reports whether a job may run; if so, the job must call end when done.
func (t *jobTracker) begin() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	t.running++
	return true
}

func (t *jobTracker) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running--
	if t.running == 0 {
		t.idle.Broadcast()
	}
}

// enter starts a job of the queue whose context is queueCtx. ok is false when the job must
// return without touching its task: the queue stopped while the job waited in the scheduler,
// or the queue or the scheduler is cancelling. Otherwise the job runs its task under ctx, which
// ends with either, and calls exit when it returns.
func (t *jobTracker) enter(queueCtx, schedCtx context.Context) (ctx context.Context, exit func(), ok bool) {
	if !t.begin() {
		return nil, nil, false
	}
	if schedCtx.Err() != nil || queueCtx.Err() != nil {
		t.end()
		return nil, nil, false
	}
	ctx, cancel := mergeCancel(queueCtx, schedCtx)
	return ctx, func() { cancel(); t.end() }, true
}

// stopAndWait refuses new jobs and waits for running ones to return.
func (t *jobTracker) stopAndWait() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	for t.running > 0 {
		t.idle.Wait()
	}
}

// safeExecute turns an executor panic into an error, so one bad task is retried and logged
// instead of taking the host down.
func safeExecute(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tasks: executor panicked: %v", r)
		}
	}()
	return f()
}

// mergeCancel returns a context that ends when either parent ends.
func mergeCancel(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}
