package matching

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/log/tag"
)

// refusalLogInterval bounds the "backlog full" log to one line per queue per interval; the
// line carries the number refused since the previous one, and every refusal is counted in
// matching_backlog_rejected.
const refusalLogInterval = 10 * time.Second

// ActivityTaskRef points at one dispatch of an activity. History owns the activity; the stamp
// lets history reject a reference that a later dispatch has made stale.
type ActivityTaskRef struct {
	NamespaceID string
	TaskQueue   string
	ActivityID  string
	RunID       string
	// Stamp is the fencing stamp of this dispatch. A newer stamp for the same (NamespaceID,
	// ActivityID, RunID) supersedes an older one still queued.
	Stamp int64
	// ScheduledTime orders the backlog (earliest first, then insertion order).
	ScheduledTime time.Time
}

func (r ActivityTaskRef) key() taskKey { return taskKey{r.NamespaceID, r.ActivityID, r.RunID} }

func (r ActivityTaskRef) validate() error {
	if r.NamespaceID == "" || r.TaskQueue == "" || r.ActivityID == "" {
		return fmt.Errorf("%w: activity task needs a namespace, task queue and activity ID", ErrInvalidArgument)
	}
	return nil
}

// ActivityPoll is one PollActivityTaskQueue call.
type ActivityPoll struct {
	NamespaceID string
	TaskQueue   string
	Identity    string
	// WorkerInstanceKey names the SDK worker (may be empty); CompletePollsOfWorker ends the
	// polls that carry it.
	WorkerInstanceKey string
	// RatePerSecond is the dispatch rate limit the worker asked for (0: none), shown in the
	// queue's poller list.
	RatePerSecond float64
}

// activityQueue is one (namespace, task queue). Invariant: it never holds both backlog and
// waiters: a task arriving while polls wait goes to one of them, and a poll arriving while
// tasks wait takes one.
type activityQueue struct {
	key     queueKey
	backlog backlog
	waiters waitList[ActivityTaskRef]
	idle    idleState

	lastRefusalLog time.Time
	refusedSince   int

	// added and dispatched count the tasks accepted and handed to polls (DescribeActivityQueue).
	added, dispatched rateCounter
}

func (q *activityQueue) idleState() *idleState { return &q.idle }
func (q *activityQueue) isEmpty() bool         { return q.backlog.Len() == 0 && q.waiters.len() == 0 }

// AddActivityTask queues a task, or hands it straight to the longest-waiting poll of its queue.
//
// Tasks are deduplicated by (namespace, activity, run): if a task with the same or a newer
// stamp is queued, the call does nothing; an older one is replaced. It returns ErrBacklogFull
// when the queue holds Options.BacklogCap tasks — the task is then not queued but remains
// SCHEDULED in history, which dispatches it again on recovery — and ErrStopped after Stop.
func (m *Matcher) AddActivityTask(ref ActivityTaskRef) error {
	if err := ref.validate(); err != nil {
		return err
	}
	now := m.ts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return ErrStopped
	}
	if !m.ownsLocked(ref.NamespaceID, ref.TaskQueue) {
		return ErrNotOwner
	}
	old := m.tasks[ref.key()]
	if old != nil && old.ref.Stamp >= ref.Stamp {
		m.metrics.tasksDeduplicated.Inc(1)
		return nil
	}
	qk := queueKey{ref.NamespaceID, ref.TaskQueue}
	q := m.activityQueues[qk]
	// Checked before anything changes, so a refused call leaves every queue as it was.
	// Replacing an older stamp in the same queue does not grow it and is always allowed.
	if q != nil && q.backlog.Len() >= m.opts.BacklogCap && (old == nil || old.queue != q) {
		m.refuse(q, ref, now)
		return fmt.Errorf("%w: task queue %q holds %d tasks", ErrBacklogFull, ref.TaskQueue, q.backlog.Len())
	}
	if old != nil {
		m.metrics.tasksDeduplicated.Inc(1)
		m.removeEntry(old, now)
	}
	if q == nil {
		q = m.newActivityQueue(qk)
	}
	m.metrics.tasksAdded.Inc(1)
	q.added.inc(now)
	m.enqueue(q, ref, false, now)
	return nil
}

// ReturnActivityTask puts back, at the head of its queue, a task that a poll obtained but the
// frontend could not deliver. A task superseded meanwhile by a newer stamp is dropped. Returns
// are accepted over the backlog cap: the task was counted in the queue before it was dispatched.
func (m *Matcher) ReturnActivityTask(ref ActivityTaskRef) error {
	if err := ref.validate(); err != nil {
		return err
	}
	now := m.ts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return ErrStopped
	}
	if !m.ownsLocked(ref.NamespaceID, ref.TaskQueue) {
		return ErrNotOwner
	}
	m.returnLocked(ref, now)
	return nil
}

func (m *Matcher) returnLocked(ref ActivityTaskRef, now time.Time) {
	if old := m.tasks[ref.key()]; old != nil {
		switch {
		case old.ref.Stamp > ref.Stamp:
			m.metrics.tasksDeduplicated.Inc(1)
			return
		case old.ref.Stamp == ref.Stamp:
			// The same dispatch was added again while out: promote the queued copy.
			m.metrics.tasksReturned.Inc(1)
			if !old.returned {
				old.returned = true
				old.queue.backlog.fix(old)
			}
			return
		default:
			m.removeEntry(old, now)
		}
	}
	qk := queueKey{ref.NamespaceID, ref.TaskQueue}
	q := m.activityQueues[qk]
	if q == nil {
		q = m.newActivityQueue(qk)
	}
	m.metrics.tasksReturned.Inc(1)
	m.enqueue(q, ref, true, now)
}

// RemoveActivityTask drops the queued task of an activity (e.g. cancelled while SCHEDULED) and
// reports whether there was one. A task already handed to a poll is not affected: history's
// stamp check rejects its start.
func (m *Matcher) RemoveActivityTask(namespaceID, activityID, runID string) bool {
	now := m.ts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.tasks[taskKey{namespaceID, activityID, runID}]
	if e == nil {
		return false
	}
	m.removeEntry(e, now)
	return true
}

// PollActivityTask returns the next task of the poll's queue, waiting for one if needed.
//
// It returns ok=false with a nil error when the wait ends without a task: PollDeadlineMargin
// before ctx's deadline or after MaxPollWait, whichever is first; at once for a worker that
// CompletePollsOfWorker named within ShutdownTombstoneTTL; or when that call or Stop ends the
// poll. If ctx ends first it returns ctx.Err(). A task is never lost to a poll that ends: a
// task matched to a poll whose ctx ended at the same moment goes back to the head of the queue.
func (m *Matcher) PollActivityTask(ctx context.Context, poll ActivityPoll) (ActivityTaskRef, bool, error) {
	if poll.NamespaceID == "" || poll.TaskQueue == "" {
		return ActivityTaskRef{}, false, fmt.Errorf("%w: poll needs a namespace and task queue", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return ActivityTaskRef{}, false, err
	}
	now := m.ts.Now()
	wait := m.pollWait(ctx, now)
	wk := workerKey{poll.NamespaceID, poll.WorkerInstanceKey}
	qk := queueKey{poll.NamespaceID, poll.TaskQueue}

	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return ActivityTaskRef{}, false, ErrStopped
	}
	if !m.ownsLocked(poll.NamespaceID, poll.TaskQueue) {
		m.mu.Unlock()
		return ActivityTaskRef{}, false, ErrNotOwner
	}
	if poll.WorkerInstanceKey != "" {
		if exp, ok := m.tombstones[wk]; ok && now.Before(exp) {
			m.mu.Unlock()
			return ActivityTaskRef{}, false, nil
		}
	}
	m.recordPoller(qk, poll, now)
	q := m.activityQueues[qk]
	if q != nil {
		if e := q.backlog.pop(); e != nil {
			q.dispatched.inc(now)
			delete(m.tasks, e.ref.key())
			m.setBacklog(m.backlogSize - 1)
			m.updateIdle(q, now)
			m.mu.Unlock()
			m.metrics.tasksDispatched.Inc(1)
			return e.ref, true, nil
		}
	}
	if wait <= 0 {
		m.mu.Unlock()
		m.metrics.pollTimeouts.Inc(1)
		return ActivityTaskRef{}, false, nil
	}
	if q == nil {
		q = m.newActivityQueue(qk)
	}
	w := newWaiter[ActivityTaskRef](ctx, qk)
	if poll.WorkerInstanceKey != "" {
		w.workerKey = wk
	}
	q.waiters.pushBack(w)
	m.registerWorkerPoll(w)
	m.updateIdle(q, now)
	m.mu.Unlock()

	timerC, timer := m.ts.NewTimer(wait)
	defer timer.Stop()
	m.pollWaiting(poll.TaskQueue)

	d, outcome := await(m, ctx, w, timerC, func() {
		q.waiters.remove(w)
		m.unregisterWorkerPoll(w)
		m.updateIdle(q, m.ts.Now())
	})
	switch {
	case outcome == outcomeTimedOut:
		m.metrics.pollTimeouts.Inc(1)
		return ActivityTaskRef{}, false, nil
	case outcome == outcomeCancelled:
		return ActivityTaskRef{}, false, ctx.Err()
	case !d.ok:
		// Completed empty: by CompletePollsOfWorker or Stop, or skipped because ctx had ended.
		return ActivityTaskRef{}, false, ctx.Err()
	case ctx.Err() != nil:
		// Matched in the same instant the caller went away: the response could not reach the
		// worker, so the task must not leave matching.
		m.requeue(d.value)
		return ActivityTaskRef{}, false, ctx.Err()
	}
	m.metrics.tasksDispatched.Inc(1)
	m.metrics.syncMatches.Inc(1)
	return d.value, true, nil
}

// CompletePollsOfWorker ends, empty, every open activity poll carrying the worker's instance
// key (ShutdownWorker with worker_poll_complete_on_shutdown) and answers that worker's later
// polls empty at once for ShutdownTombstoneTTL. It returns the number of polls ended. The SDK
// stops polling after ShutdownWorker; the tombstone covers polls already in flight.
func (m *Matcher) CompletePollsOfWorker(namespaceID, workerInstanceKey string) int {
	if workerInstanceKey == "" {
		return 0
	}
	now := m.ts.Now()
	wk := workerKey{namespaceID, workerInstanceKey}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return 0
	}
	exp := now.Add(m.opts.ShutdownTombstoneTTL)
	m.tombstones[wk] = exp
	m.tombstoneOrder = append(m.tombstoneOrder, tombstone{key: wk, expires: exp})

	m.forgetPollersOfWorker(wk)
	polls := m.pollsByWorker[wk]
	delete(m.pollsByWorker, wk)
	for w := range polls {
		q := m.activityQueues[w.queueKey]
		q.waiters.remove(w)
		m.updateIdle(q, now)
		w.ch <- delivery[ActivityTaskRef]{}
	}
	return len(polls)
}

// requeue returns a task that a cancelled poll received. If its queue was released meanwhile
// the task is dropped: history re-queues every dispatched activity after the membership
// change that moved the queue.
func (m *Matcher) requeue(ref ActivityTaskRef) {
	now := m.ts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped || !m.ownsLocked(ref.NamespaceID, ref.TaskQueue) {
		return
	}
	m.returnLocked(ref, now)
}

func (m *Matcher) newActivityQueue(qk queueKey) *activityQueue {
	q := &activityQueue{key: qk}
	m.activityQueues[qk] = q
	return q
}

// enqueue hands ref to the longest-waiting live poll of q, or queues it.
func (m *Matcher) enqueue(q *activityQueue, ref ActivityTaskRef, returned bool, now time.Time) {
	if w := q.waiters.popLive(m.unregisterWorkerPoll); w != nil {
		q.dispatched.inc(now)
		w.ch <- delivery[ActivityTaskRef]{value: ref, ok: true}
		m.updateIdle(q, now)
		return
	}
	m.seq++
	e := &taskEntry{ref: ref, queue: q, returned: returned, seq: m.seq}
	q.backlog.push(e)
	m.tasks[ref.key()] = e
	m.setBacklog(m.backlogSize + 1)
	m.updateIdle(q, now)
}

func (m *Matcher) removeEntry(e *taskEntry, now time.Time) {
	e.queue.backlog.remove(e)
	delete(m.tasks, e.ref.key())
	m.setBacklog(m.backlogSize - 1)
	m.updateIdle(e.queue, now)
}

func (m *Matcher) setBacklog(n int) {
	m.backlogSize = n
	m.metrics.backlog.Update(float64(n))
}

func (m *Matcher) refuse(q *activityQueue, ref ActivityTaskRef, now time.Time) {
	m.metrics.backlogRejected.Inc(1)
	q.refusedSince++
	if !q.lastRefusalLog.IsZero() && now.Sub(q.lastRefusalLog) < refusalLogInterval {
		return
	}
	m.logger.Warn("task queue backlog is full: refusing activity task (it stays SCHEDULED in history, which dispatches it again on recovery)",
		tag.NamespaceID(ref.NamespaceID),
		taskQueueField(ref.TaskQueue),
		activityIDField(ref.ActivityID),
		zap.Int("backlog-cap", m.opts.BacklogCap),
		zap.Int("refused-since-last-log", q.refusedSince))
	q.lastRefusalLog = now
	q.refusedSince = 0
}

func (m *Matcher) registerWorkerPoll(w *waiter[ActivityTaskRef]) {
	if w.workerKey.instanceKey == "" {
		return
	}
	polls := m.pollsByWorker[w.workerKey]
	if polls == nil {
		polls = make(map[*waiter[ActivityTaskRef]]struct{})
		m.pollsByWorker[w.workerKey] = polls
	}
	polls[w] = struct{}{}
}

func (m *Matcher) unregisterWorkerPoll(w *waiter[ActivityTaskRef]) {
	if w.workerKey.instanceKey == "" {
		return
	}
	if polls := m.pollsByWorker[w.workerKey]; polls != nil {
		delete(polls, w)
		if len(polls) == 0 {
			delete(m.pollsByWorker, w.workerKey)
		}
	}
}
