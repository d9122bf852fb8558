// Package matching holds vigil's in-memory task queues: activity tasks waiting for a worker's
// PollActivityTaskQueue, and worker commands waiting for a worker's PollNexusTaskQueue on its
// control queue.
//
// Matching holds references only and is never the source of truth: history owns every
// activity, and its recovery scan dispatches every SCHEDULED activity again after a restart.
// Losing matching's memory therefore delays tasks but never loses them. See README.md.
package matching

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/memrelease"
)

type (
	queueKey  struct{ namespaceID, name string }
	workerKey struct{ namespaceID, instanceKey string }
	// taskKey identifies an activity attempt's task independently of its stamp, so a newer
	// dispatch of the same activity finds and replaces an older one still queued.
	taskKey struct{ namespaceID, activityID, runID string }
)

// Matcher is the host's set of task queues. All methods are safe for concurrent use.
//
// One mutex guards everything: every operation under it is O(1) or O(log n) on one queue, the
// hand-off to a waiting poll is a send on a buffered channel, and nothing blocks while holding
// it. The global indexes (task dedupe across queues, polls by worker) would otherwise need
// their own locks and a lock order.
type Matcher struct {
	ts      clock.TimeSource
	opts    Options
	logger  *zap.Logger
	metrics matcherMetrics

	mu             sync.Mutex
	stopped        bool
	started        bool
	activityQueues map[queueKey]*activityQueue
	tasks          map[taskKey]*taskEntry
	backlogSize    int
	seq            uint64
	pollsByWorker  map[workerKey]map[*waiter[ActivityTaskRef]]struct{}
	tombstones     map[workerKey]time.Time // worker → end of its shutdown tombstone
	tombstoneOrder []tombstone             // FIFO by expiry (the TTL is fixed)
	commandQueues  map[queueKey]*commandQueue
	busyCommands   map[*commandQueue]struct{} // control queues holding commands
	// pollers is the poller history of the activity task queues (DescribeActivityQueue), by
	// queue and identity, kept PollerHistoryTTL after a poll whether or not the queue is;
	// pollerOrder lists the records by last access, oldest first, for the sweep.
	pollers         map[queueKey]map[string]*pollerRecord
	pollerOrder     list.List
	pollersByWorker map[workerKey]map[*pollerRecord]struct{}
	// idle lists the queues that are empty and unpolled, oldest first; the sweep drops those
	// idle for QueueIdleTimeout. A queue leaves the list as soon as it is used again.
	idle list.List
	// owns says whether this host owns a queue; nil means every queue (a single host). It is
	// consulted under mu, so that a queue released by ReleaseUnowned cannot be refilled by a
	// call that checked ownership just before the release.
	owns func(namespaceID, queue string) bool

	// peaks are the largest sizes the per-worker maps had since they were last made (sampled by
	// the sweep): a Go map keeps the buckets it grew for a fleet that has gone.
	peaks mapPeaks

	startOnce, stopOnce sync.Once
	stopCh              chan struct{}
	sweeperDone         chan struct{}
}

type mapPeaks struct {
	activityQueues, tasks, pollsByWorker, tombstones, commandQueues, pollers, pollersByWorker int
}

// mapShrinkMin is the peak from which a map is made anew once it holds a quarter of it.
const mapShrinkMin = memrelease.ShrinkMapMin

// shrinkMap is memrelease.ShrinkMap from mapShrinkMin.
func shrinkMap[K comparable, V any](m map[K]V, peak *int) map[K]V {
	m, _ = memrelease.ShrinkMap(m, peak, mapShrinkMin)
	return m
}

type tombstone struct {
	key     workerKey
	expires time.Time
}

// idleTracked is a queue that can be collected once idle.
type idleTracked interface {
	idleState() *idleState
	isEmpty() bool
}

type idleState struct {
	elem  *list.Element // in Matcher.idle; nil while the queue is in use
	since time.Time
}

// New returns a Matcher. Zero-valued options take their defaults; a nil logger or scope
// discards; a nil time source reads the system clock. Call Start to run the background sweep
// and Stop to end it.
func New(ts clock.TimeSource, opts Options, logger *zap.Logger, scope tally.Scope) *Matcher {
	if ts == nil {
		ts = clock.NewRealTimeSource()
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	if scope == nil {
		scope = tally.NoopScope
	}
	return &Matcher{
		ts:              ts,
		opts:            opts.withDefaults(),
		logger:          logger.With(tag.Component("matching")),
		metrics:         newMatcherMetrics(scope),
		activityQueues:  make(map[queueKey]*activityQueue),
		tasks:           make(map[taskKey]*taskEntry),
		pollsByWorker:   make(map[workerKey]map[*waiter[ActivityTaskRef]]struct{}),
		tombstones:      make(map[workerKey]time.Time),
		commandQueues:   make(map[queueKey]*commandQueue),
		busyCommands:    make(map[*commandQueue]struct{}),
		pollers:         make(map[queueKey]map[string]*pollerRecord),
		pollersByWorker: make(map[workerKey]map[*pollerRecord]struct{}),
		stopCh:          make(chan struct{}),
		sweeperDone:     make(chan struct{}),
	}
}

// Start runs the background sweep (command redelivery and expiry, tombstone expiry, idle
// queue collection). Queues work without it; nothing is collected or redelivered until it runs.
// Calling Start more than once, or after Stop, does nothing.
func (m *Matcher) Start() {
	m.startOnce.Do(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.stopped {
			return
		}
		m.started = true
		// Armed here rather than in the goroutine so that a test moving a fake clock right
		// after Start cannot move it before the timer exists.
		c, t := m.ts.NewTimer(m.opts.SweepInterval)
		go m.runSweeper(c, t)
	})
}

// Stop completes every open poll with no task and refuses later calls with ErrStopped. Queued
// tasks and commands are dropped with the matcher: history still has them. Stop returns once
// the background sweep has exited.
func (m *Matcher) Stop() {
	m.stopOnce.Do(func() {
		m.mu.Lock()
		m.stopped = true
		started := m.started
		for _, q := range m.activityQueues {
			completeAll(&q.waiters)
		}
		for _, q := range m.commandQueues {
			completeAll(&q.waiters)
		}
		clear(m.pollsByWorker)
		m.mu.Unlock()
		close(m.stopCh)
		if started {
			<-m.sweeperDone
		}
	})
}

func completeAll[T any](l *waitList[T]) {
	for w := l.head; w != nil; w = l.head {
		l.remove(w)
		w.ch <- delivery[T]{}
	}
}

func (m *Matcher) runSweeper(c <-chan time.Time, t clock.Timer) {
	defer close(m.sweeperDone)
	for {
		select {
		case <-m.stopCh:
			t.Stop()
			return
		case <-c:
		}
		c, t = m.ts.NewTimer(m.opts.SweepInterval)
		m.sweep()
		if h := m.opts.TestHooks; h != nil && h.Swept != nil {
			h.Swept()
		}
	}
}

// sweep does the time-driven work: expired tombstones and poller history, command
// redelivery and expiry, idle queues. Each part touches only what is due or busy, not every queue.
func (m *Matcher) sweep() {
	now := m.ts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}

	for len(m.tombstoneOrder) > 0 && !now.Before(m.tombstoneOrder[0].expires) {
		key := m.tombstoneOrder[0].key
		m.tombstoneOrder[0] = tombstone{}
		m.tombstoneOrder = m.tombstoneOrder[1:]
		if exp, ok := m.tombstones[key]; ok && !now.Before(exp) {
			delete(m.tombstones, key)
		}
	}

	m.expirePollers(now)

	for q := range m.busyCommands {
		m.expireCommands(q, now)
		m.dispatchCommands(q, now)
		m.updateIdle(q, now)
	}

	for e := m.idle.Front(); e != nil; e = m.idle.Front() {
		q := e.Value.(idleTracked)
		st := q.idleState()
		if now.Sub(st.since) < m.opts.QueueIdleTimeout {
			break
		}
		m.idle.Remove(e)
		st.elem = nil
		switch q := q.(type) {
		case *activityQueue:
			delete(m.activityQueues, q.key)
		case *commandQueue:
			delete(m.commandQueues, q.key)
		}
	}

	m.activityQueues = shrinkMap(m.activityQueues, &m.peaks.activityQueues)
	m.tasks = shrinkMap(m.tasks, &m.peaks.tasks)
	m.pollsByWorker = shrinkMap(m.pollsByWorker, &m.peaks.pollsByWorker)
	m.tombstones = shrinkMap(m.tombstones, &m.peaks.tombstones)
	m.commandQueues = shrinkMap(m.commandQueues, &m.peaks.commandQueues)
	m.pollers = shrinkMap(m.pollers, &m.peaks.pollers)
	m.pollersByWorker = shrinkMap(m.pollersByWorker, &m.peaks.pollersByWorker)
	if cap(m.tombstoneOrder) > mapShrinkMin && len(m.tombstoneOrder) < cap(m.tombstoneOrder)/4 {
		m.tombstoneOrder = append([]tombstone(nil), m.tombstoneOrder...)
	}
}

// updateIdle puts q on the idle list when it has just become empty and unpolled, and takes it
// off when it is in use again. Call it, under m.mu, after any change to q.
func (m *Matcher) updateIdle(q idleTracked, now time.Time) {
	st := q.idleState()
	switch empty := q.isEmpty(); {
	case empty && st.elem == nil:
		st.since = now
		st.elem = m.idle.PushBack(q)
	case !empty && st.elem != nil:
		m.idle.Remove(st.elem)
		st.elem = nil
	}
}

// pollWait is how long a poll may wait: until PollDeadlineMargin before the caller's deadline,
// and never longer than MaxPollWait. The deadline is compared with the TimeSource, which is the
// wall clock in production.
func (m *Matcher) pollWait(ctx context.Context, now time.Time) time.Duration {
	wait := m.opts.MaxPollWait
	if dl, ok := clock.DeadlineOf(ctx, m.ts); ok {
		if untilMargin := dl.Sub(now) - m.opts.PollDeadlineMargin; untilMargin < wait {
			wait = untilMargin
		}
	}
	return wait
}

func (m *Matcher) pollWaiting(queue string) {
	if h := m.opts.TestHooks; h != nil && h.PollWaiting != nil {
		h.PollWaiting(queue)
	}
}

// Log fields for user-created names; logs may carry them, metrics never do.
func taskQueueField(name string) zap.Field    { return zap.String("task-queue", name) }
func controlQueueField(name string) zap.Field { return zap.String("control-queue", name) }
func activityIDField(id string) zap.Field     { return zap.String("activity-id", id) }
