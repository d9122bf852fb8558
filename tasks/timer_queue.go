package tasks

import (
	"container/heap"
	"context"
	"hash/maphash"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/memrelease"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/persistence"
)

// TimerExecutor runs timer tasks. It is implemented by the history host, which knows the task
// types; the queue only knows when to call it.
type TimerExecutor interface {
	// ExecuteTimer runs a due timer task. nil = done (the queue deletes the task); an error =
	// retry later with backoff.
	ExecuteTimer(ctx context.Context, task *persistence.TimerTask) error
}

// TimerQueue fires one shard's timer tasks at their VisibilityTime.
//
// Tasks due within the look-ahead window are read from the store, in (VisibilityTime, TaskID)
// order, into a min-heap; one TimeSource timer waits for the earliest. Memory is bounded by
// MaxInMemory whatever the number of stored timers: only a window is loaded, and the rest is
// read as the window moves.
type TimerQueue struct {
	shardID int32
	store   persistence.TaskStore
	// completer deletes executed tasks in batches and then lets them leave memory.
	completer *completer[*timerEntry]
	exec      TimerExecutor
	sched     *Scheduler
	ts        clock.TimeSource
	cfg       timerQueueConfig
	logger    *zap.Logger

	firedCounter tally.Counter
	lagTimer     tally.Timer
	errorCounter tally.Counter
	// supersededCounter counts singleton timers dropped from memory because a newer one of the
	// same execution and type replaced them.
	supersededCounter tally.Counter
	parkedCounter     tally.Counter
	deferredCounter   tally.Counter
	readErrors        tally.Counter
	inMemoryGauge     tally.Gauge
	stuckGauge        tally.Gauge

	ctx       context.Context
	cancel    context.CancelFunc
	stopCh    chan struct{}
	doneCh    chan struct{}
	wakeCh    chan struct{}
	startOnce sync.Once
	stopOnce  sync.Once
	jobs      *jobTracker

	mu        sync.Mutex
	started   bool
	startTime time.Time
	// limiter spreads recovery-delayed tasks; it is read with explicit times from ts, never the
	// wall clock.
	limiter *rate.Limiter
	pending timerHeap
	// known holds every task in memory: pending in the heap or in flight. len(known) is what
	// MaxInMemory bounds.
	known  map[timerMapKey]*timerEntry
	recent *recentSet[timerMapKey]
	// singletons holds the newest singleton timer in memory per (execution, task type). The
	// store keeps one row per pair, so when a newer one arrives the older one is already gone
	// from it: dropping the older from memory spares a pointless run (a lease timer replaced by
	// every heartbeat would otherwise fire once per heartbeat, only to be found stale).
	singletons map[singletonKey]*timerEntry
	// knownPeak is the most tasks known held since the maps were last made: Go maps keep the
	// buckets they grew, so once a burst has drained they are made anew (shrinkLocked).
	knownPeak int
	seed      maphash.Seed
	// namespaces interns namespace IDs (a handful) for the timers in memory.
	namespaces map[string]string
	// lastReadKey is where the next read starts (exclusive).
	lastReadKey persistence.TimerTaskKey
	// loadedUpTo is the invariant the notification path relies on: every stored task with a key
	// <= loadedUpTo is in known, in recent, or was deleted. A task written later with a key in
	// that range would never be returned by a read (reads only move forward), so it must enter
	// the heap when it is notified; a task beyond it is left to a read.
	loadedUpTo persistence.TimerTaskKey
	// moreToRead is set when the last read stopped at a page or memory limit rather than at the
	// end of the window.
	moreToRead    bool
	readRequested bool
	// reading and readBefore describe the read in flight. A task notified during it may or may
	// not be in its result, depending on when its write committed; it is covered if it falls in
	// the read's range, since inserting a task the read also returns is harmless (dedupe) while
	// missing it would delay it to a later read.
	reading    bool
	readBefore time.Time
	// readGen changes whenever the read cursor is moved back; a read that started under an older
	// generation is discarded, because applying it would move the cursor past the rewind.
	readGen uint64
	stuck   int
}

// timerMapKey is a TimerTaskKey usable as a map key: time.Time values for one instant may
// differ in location or monotonic reading and would not compare equal.
type timerMapKey struct {
	unixNano int64
	taskID   int64
}

func mapKeyOf(k persistence.TimerTaskKey) timerMapKey {
	return timerMapKey{unixNano: k.VisibilityTime.UnixNano(), taskID: k.TaskID}
}

type timerEntry struct {
	task *persistence.TimerTask
	key  persistence.TimerTaskKey
	// fireAt is when the entry may next run: VisibilityTime, pushed back by a restart grace,
	// the recovery limiter, a retry backoff, a deferral or a hold (Hold).
	fireAt time.Time
	// recovering marks a task delayed by restart recovery; it takes one limiter token before
	// its first run.
	recovering bool
	tokenHeld  bool
	retryState
	index int
}

// NewTimerQueue returns a stopped queue for one shard. It panics if opts holds an invalid
// (negative) setting.
func NewTimerQueue(
	shardID int32,
	store persistence.TaskStore,
	exec TimerExecutor,
	sched *Scheduler,
	ts clock.TimeSource,
	opts TimerQueueOptions,
	logger *zap.Logger,
	scope tally.Scope,
) *TimerQueue {
	cfg := opts.resolve()
	scope = scope.Tagged(map[string]string{metricTagQueue: "timer"})
	// Gauges are per shard (a handful): with the same labels, shards would overwrite each other.
	shardScope := scope.Tagged(map[string]string{"shard": strconv.Itoa(int(shardID))})
	ctx, cancel := context.WithCancel(context.Background())
	q := &TimerQueue{
		shardID:           shardID,
		store:             store,
		exec:              exec,
		sched:             sched,
		ts:                ts,
		cfg:               cfg,
		logger:            logger.With(zap.Int32("shard-id", shardID), zap.String("queue", "timer")),
		firedCounter:      metrics.TimerTasksFired.With(scope),
		lagTimer:          metrics.TimerTaskLag.With(scope),
		errorCounter:      metrics.TimerTaskFailures.With(scope),
		parkedCounter:     metrics.TasksParked.With(scope),
		deferredCounter:   metrics.TimerTasksDeferred.With(scope),
		supersededCounter: metrics.TimerTasksSuperseded.With(scope),
		readErrors:        metrics.TaskReadErrors.With(scope),
		inMemoryGauge:     metrics.TimerQueueInMemory.With(shardScope),
		stuckGauge:        metrics.TimerTasksStuck.With(shardScope),
		ctx:               ctx,
		cancel:            cancel,
		stopCh:            make(chan struct{}),
		doneCh:            make(chan struct{}),
		wakeCh:            make(chan struct{}, 1),
		jobs:              newJobTracker(),
		limiter:           rate.NewLimiter(rate.Limit(cfg.overdueFireRate()), cfg.overdueFireBurst()),
		known:             make(map[timerMapKey]*timerEntry),
		singletons:        make(map[singletonKey]*timerEntry),
		seed:              maphash.MakeSeed(),
		namespaces:        make(map[string]string),
		recent:            newRecentSet[timerMapKey](cfg.recentlyCompleted),
		readRequested:     true,
	}
	q.completer = newCompleter(func(ctx context.Context, batch []*timerEntry) error {
		keys := make([]persistence.TimerTaskKey, len(batch))
		for i, e := range batch {
			keys[i] = e.key
		}
		return q.store.CompleteTimerTasks(ctx, q.shardID, keys)
	}, func(e *timerEntry) { q.finish(e, nil) }, cfg.retry, ts, q.logger)
	return q
}

// Start records the queue's start time (the reference of restart recovery) and starts reading
// and firing. The scheduler must already be started.
func (q *TimerQueue) Start() {
	q.startOnce.Do(func() {
		q.mu.Lock()
		q.started = true
		q.startTime = q.ts.Now()
		q.mu.Unlock()
		q.completer.start(q.ctx)
		go q.loop()
	})
}

// Stop stops reading and firing, cancels the context of executing tasks and waits for them to
// return. Tasks not completed stay in the store for the shard's next owner.
func (q *TimerQueue) Stop() {
	q.stopOnce.Do(func() {
		close(q.stopCh)
		q.cancel()
		q.mu.Lock()
		started := q.started
		q.started = false
		q.mu.Unlock()
		if started {
			<-q.doneCh
			q.completer.halt()
		}
		q.jobs.stopAndWait()
	})
}

// NotifyNewTimers tells the queue about timers whose write has committed. Tasks inside the range
// already loaded go straight into memory (a read would never return them); later ones are left
// to the read that reaches them. Duplicates of pending, executing or recently completed tasks
// are dropped.
func (q *TimerQueue) NotifyNewTimers(tasks []*persistence.TimerTask) {
	q.mu.Lock()
	if !q.started {
		q.mu.Unlock()
		return
	}
	var headBefore time.Time
	if len(q.pending) > 0 {
		headBefore = q.pending[0].fireAt
	}
	for _, t := range tasks {
		k := t.Key()
		mk := mapKeyOf(k)
		if _, ok := q.known[mk]; ok || q.recent.contains(mk) {
			continue
		}
		covered := k.Compare(q.loadedUpTo) <= 0 || (q.reading && t.VisibilityTime.Before(q.readBefore))
		if !covered || !q.makeRoomLocked(k) {
			if t.Singleton {
				// t stays in the store for a later read, but the timer it replaced there
				// must not stay in memory: it would fire only to be found stale.
				q.dropSupersededLocked(t)
			}
			continue
		}
		q.insertLocked(t)
	}
	rearm := len(q.pending) > 0 && (headBefore.IsZero() || q.pending[0].fireAt.Before(headBefore))
	q.inMemoryGauge.Update(float64(len(q.known)))
	q.mu.Unlock()
	if rearm {
		q.wake()
	}
}

// Hold keeps the pending singleton timer of execution and task type in memory until until:
// it fires then, or at its own time if that is later. A later Hold replaces the earlier one,
// and a zero until lets it fire at its own time again. Nothing is written: the stored timer
// keeps its time, and after a restart fires at it. The caller holds a timer only when running
// it before until would only defer it to until (chasm.MutableContext.PostponeTimer). A timer
// that is running, retrying a failure, in restart recovery, or not in memory is left as it is.
func (q *TimerQueue) Hold(execution persistence.ExecutionKey, taskTypeID uint32, until time.Time) {
	q.mu.Lock()
	e, ok := q.singletons[singletonKey(maphash.Comparable(q.seed, singletonID{execution: execution, taskTypeID: taskTypeID}))]
	if !ok || e.index < 0 || e.recovering || e.attempts > 0 || e.task.Execution != execution || e.task.TaskTypeID != taskTypeID {
		q.mu.Unlock()
		return
	}
	fireAt := e.task.VisibilityTime
	if until.After(fireAt) {
		fireAt = until
	}
	earlier := fireAt.Before(e.fireAt)
	e.fireAt = fireAt
	heap.Fix(&q.pending, e.index)
	// A later fire time needs no wake: the loop finds nothing due at the earlier one and
	// waits again. An earlier one at the head must rearm the loop's timer.
	isHead := e.index == 0
	q.mu.Unlock()
	if earlier && isHead {
		q.wake()
	}
}

// singletonKey is a hash of a singleton timer's (execution, task type). The full pair would
// hold the execution key's strings once more for every timer in memory; a collision is told
// apart by comparing the tasks themselves.
type singletonKey uint64

type singletonID struct {
	execution  persistence.ExecutionKey
	taskTypeID uint32
}

func (q *TimerQueue) singletonKeyOf(t *persistence.TimerTask) singletonKey {
	return singletonKey(maphash.Comparable(q.seed, singletonID{execution: t.Execution, taskTypeID: t.TaskTypeID}))
}

// supersedeLocked keeps one singleton timer per (execution, task type) in memory: the one with
// the highest task ID, which is the one in the store. keep is false if t itself is older than
// one already held. A superseded timer that is already running is left to finish (its
// executor finds it stale). track is false when another execution's timer holds t's hash:
// t is then held without being tracked (if a newer one replaces it, it fires and is found
// stale, as before this bookkeeping existed).
func (q *TimerQueue) supersedeLocked(t *persistence.TimerTask) (keep, track bool) {
	old, ok := q.singletons[q.singletonKeyOf(t)]
	if ok && (old.task.Execution != t.Execution || old.task.TaskTypeID != t.TaskTypeID) {
		return true, false
	}
	if ok && old.task.TaskID > t.TaskID {
		return false, false
	}
	if ok && old.index >= 0 {
		q.removeSupersededLocked(old)
	}
	return true, true
}

// removeSupersededLocked takes a pending timer that a newer singleton replaced in the store
// out of memory, remembering its key so that a read in flight does not bring it back.
func (q *TimerQueue) removeSupersededLocked(old *timerEntry) {
	heap.Remove(&q.pending, old.index)
	mk := mapKeyOf(old.key)
	delete(q.known, mk)
	q.recent.add(mk)
	q.supersededCounter.Inc(1)
}

// dropSupersededLocked removes from memory the pending singleton timer that t replaced in the
// store, when t itself is not taken into memory.
func (q *TimerQueue) dropSupersededLocked(t *persistence.TimerTask) {
	sk := q.singletonKeyOf(t)
	old, ok := q.singletons[sk]
	if !ok || old.task.Execution != t.Execution || old.task.TaskTypeID != t.TaskTypeID || old.task.TaskID >= t.TaskID || old.index < 0 {
		return
	}
	q.removeSupersededLocked(old)
	delete(q.singletons, sk)
}

func (q *TimerQueue) forgetSingletonLocked(e *timerEntry) {
	if !e.task.Singleton {
		return
	}
	sk := q.singletonKeyOf(e.task)
	if q.singletons[sk] == e {
		delete(q.singletons, sk)
	}
}

// insertLocked adds a task read or notified for the first time, applying restart recovery.
func (q *TimerQueue) insertLocked(t *persistence.TimerTask) {
	track := false
	if t.Singleton {
		var keep bool
		if keep, track = q.supersedeLocked(t); !keep {
			q.recent.add(mapKeyOf(t.Key()))
			return
		}
	}
	// Every timer of a namespace shares one copy of its ID.
	t.Execution.NamespaceID = q.intern(t.Execution.NamespaceID)
	e := &timerEntry{task: t, key: t.Key(), fireAt: t.VisibilityTime}
	if track {
		q.singletons[q.singletonKeyOf(t)] = e
	}
	// Restart recovery, rule 1 (grace): a task type with a grace period does not fire before
	// startTime + grace, whether it came due while the shard had no owner or comes due during
	// the grace window. This is what gives worker leases a grace after a server restart: a
	// worker that heartbeats within the grace moves its lease deadline, the deferred expiry
	// task becomes stale, and its executor finds nothing to do.
	if grace := q.cfg.gracePeriod(t); grace > 0 {
		if graceEnd := q.startTime.Add(grace); e.fireAt.Before(graceEnd) {
			e.fireAt = graceEnd
			e.recovering = true
		}
	}
	// Restart recovery, rule 2 (spread): a task that came due before the queue started (the
	// host was down or the shard had no owner) fires through the overdue limiter instead of at
	// once, so a restart after an outage does not fire a whole backlog in one instant and
	// swamp the store and the destinations. Grace-deferred tasks take the same path, since
	// they all come due at the same startTime + grace.
	if t.VisibilityTime.Before(q.startTime) {
		e.recovering = true
	}
	heap.Push(&q.pending, e)
	q.known[mapKeyOf(e.key)] = e
	q.knownPeak = max(q.knownPeak, len(q.known))
}

// timerMapShrinkMin is the peak from which the queue's maps are made anew once they shrink to
// a quarter of it.
const timerMapShrinkMin = 256

// shrinkLocked gives back the memory of a burst that has drained: the maps are rebuilt at
// their current size, and the heap's array, which append only grows, is copied down.
func (q *TimerQueue) shrinkLocked() {
	known, shrunk := memrelease.ShrinkMap(q.known, &q.knownPeak, timerMapShrinkMin)
	if !shrunk {
		return
	}
	q.known, q.singletons = known, memrelease.Resized(q.singletons)
	if cap(q.pending) > 2*len(q.pending)+timerMapShrinkMin {
		q.pending = append(timerHeap(nil), q.pending...)
	}
}

func (q *TimerQueue) intern(namespaceID string) string {
	if s, ok := q.namespaces[namespaceID]; ok {
		return s
	}
	if len(q.namespaces) >= 1024 {
		return namespaceID // not a handful after all: do not grow without bound
	}
	q.namespaces[namespaceID] = namespaceID
	return namespaceID
}

// InMemory returns how many tasks the queue holds (pending, retrying or executing) and how many
// singleton timers it tracks.
func (q *TimerQueue) InMemory() (tasks, singletons int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.known), len(q.singletons)
}

// makeRoomLocked decides whether a notified task k, which is inside the loaded range, can be
// held without exceeding MaxInMemory. When memory is full it evicts the pending task with the
// largest key if that is later than k, or else declines k; either way the read cursor moves back
// to just before the task left out, which keeps loadedUpTo's invariant true and lets a later
// read bring that task back.
func (q *TimerQueue) makeRoomLocked(k persistence.TimerTaskKey) bool {
	if len(q.known) < q.cfg.maxInMemory() {
		return true
	}
	var victim *timerEntry
	for _, e := range q.pending {
		if victim == nil || e.key.Compare(victim.key) > 0 {
			victim = e
		}
	}
	if victim == nil || victim.key.Compare(k) < 0 {
		q.rewindLocked(keyBefore(k))
		return false
	}
	heap.Remove(&q.pending, victim.index)
	delete(q.known, mapKeyOf(victim.key))
	q.forgetSingletonLocked(victim)
	if victim.alerted {
		q.stuck--
	}
	q.rewindLocked(keyBefore(victim.key))
	return true
}

func (q *TimerQueue) rewindLocked(to persistence.TimerTaskKey) {
	if to.Compare(q.lastReadKey) < 0 {
		q.lastReadKey = to
	}
	if to.Compare(q.loadedUpTo) < 0 {
		q.loadedUpTo = to
	}
	q.moreToRead = true
	q.readGen++
}

// keyBefore returns the greatest key that sorts before k, as an exclusive read bound.
func keyBefore(k persistence.TimerTaskKey) persistence.TimerTaskKey {
	if k.TaskID == math.MinInt64 {
		return persistence.TimerTaskKey{VisibilityTime: k.VisibilityTime.Add(-time.Nanosecond), TaskID: math.MaxInt64}
	}
	return persistence.TimerTaskKey{VisibilityTime: k.VisibilityTime, TaskID: k.TaskID - 1}
}

// shouldReadLocked: a read is wanted and there is room for it. While the window is only partly
// loaded, it waits until a worthwhile page fits (a page, or half the cap if that is smaller), so
// that reads come in batches rather than one task per completion.
func (q *TimerQueue) shouldReadLocked() bool {
	return q.readRequested && readFits(q.moreToRead, len(q.known), q.cfg.maxInMemory(), q.cfg.pageSize())
}

func (q *TimerQueue) wake() {
	select {
	case q.wakeCh <- struct{}{}:
	default:
	}
}

func (q *TimerQueue) loop() {
	defer close(q.doneCh)
	fireTimer := &rearmableTimer{ts: q.ts}
	readTimer := &rearmableTimer{ts: q.ts}
	defer fireTimer.disarm()
	defer readTimer.disarm()
	var nextReadAt time.Time
	readFailures := 0
	for {
		q.mu.Lock()
		read := q.shouldReadLocked()
		q.mu.Unlock()
		if read {
			// The next read is timed from when this one was issued, not from when the loop
			// got here, so that the schedule does not drift with how long the read took.
			readAt, err := q.readPage()
			if err != nil {
				if q.ctx.Err() != nil {
					return
				}
				readFailures++
				q.readErrors.Inc(1)
				q.logger.Warn("timer queue read failed", zap.Error(err), zap.Int("attempt", readFailures))
				nextReadAt = readAt.Add(q.cfg.retry.backoff(readFailures))
			} else {
				readFailures = 0
				// Re-reading at half the window keeps the loaded range at least LookAhead/2
				// ahead of now, so un-notified tasks are in memory before they come due.
				nextReadAt = readAt.Add(q.cfg.lookAhead() / 2)
			}
			continue
		}
		next, ok := q.dispatchDue()
		if !ok {
			return
		}
		fireC := fireTimer.arm(next)
		readC := readTimer.arm(nextReadAt)
		select {
		case <-q.stopCh:
			return
		case <-fireC:
			fireTimer.fired()
		case <-readC:
			readTimer.fired()
			q.mu.Lock()
			q.readRequested = true
			q.mu.Unlock()
		case <-q.wakeCh:
		}
	}
}

// readPage reads the next page of the window into memory.
func (q *TimerQueue) readPage() (readAt time.Time, err error) {
	q.mu.Lock()
	maxInMemory := q.cfg.maxInMemory()
	pageSize := min(q.cfg.pageSize(), maxInMemory-len(q.known))
	readAt = q.ts.Now()
	before := readAt.Add(q.cfg.lookAhead())
	after := q.lastReadKey
	gen := q.readGen
	q.readRequested = false
	q.reading = true
	q.readBefore = before
	q.mu.Unlock()

	page, err := q.store.GetTimerTasks(q.ctx, persistence.GetTimerTasksRequest{
		ShardID: q.shardID, After: after, Before: before, PageSize: pageSize,
	})

	q.mu.Lock()
	q.reading = false
	if err != nil {
		q.mu.Unlock()
		return readAt, err
	}
	if gen != q.readGen {
		q.readRequested = true
		q.mu.Unlock()
		return readAt, nil
	}
	cursor, stopped := after, false
	for _, t := range page {
		mk := mapKeyOf(t.Key())
		if _, ok := q.known[mk]; !ok && !q.recent.contains(mk) {
			if len(q.known) >= maxInMemory {
				// Notifications filled memory while the read was in flight.
				stopped = true
				break
			}
			q.insertLocked(t)
		}
		cursor = t.Key()
	}
	q.lastReadKey = cursor
	if stopped || len(page) == pageSize {
		// The window continues beyond this page: only what was read is known to be loaded.
		q.loadedUpTo = cursor
		q.moreToRead = true
	} else {
		// The store had nothing else before `before`: everything due earlier is known.
		windowEnd := persistence.TimerTaskKey{VisibilityTime: before.Add(-time.Nanosecond), TaskID: math.MaxInt64}
		if windowEnd.Compare(q.loadedUpTo) > 0 {
			q.loadedUpTo = windowEnd
		}
		q.moreToRead = false
	}
	q.readRequested = q.moreToRead
	inMemory := len(q.known)
	q.inMemoryGauge.Update(float64(inMemory))
	q.mu.Unlock()

	if q.cfg.hooks.OnRead != nil {
		q.cfg.hooks.OnRead(len(page), inMemory)
	}
	return readAt, nil
}

// dispatchDue submits every entry whose fireAt has passed and returns the next fireAt (zero if
// none). ok is false when the queue or the scheduler is stopping.
func (q *TimerQueue) dispatchDue() (next time.Time, ok bool) {
	q.mu.Lock()
	now := q.ts.Now()
	var due []*timerEntry
	for len(q.pending) > 0 && !q.pending[0].fireAt.After(now) {
		e := heap.Pop(&q.pending).(*timerEntry)
		if e.recovering && !e.tokenHeld {
			// Tokens are reserved in heap order, so a recovery backlog fires in key order at
			// OverdueFireRate while tasks due after the start fire on time alongside it.
			e.tokenHeld = true
			if d := q.reserveOverdueTokenLocked(now); d > 0 {
				e.fireAt = now.Add(d)
				heap.Push(&q.pending, e)
				continue
			}
		}
		due = append(due, e)
	}
	if len(q.pending) > 0 {
		next = q.pending[0].fireAt
	}
	q.mu.Unlock()

	for _, e := range due {
		if err := q.sched.Submit(q.ctx, q.job(e)); err != nil {
			if q.ctx.Err() == nil {
				q.logger.Error("timer queue stopped firing: scheduler is not running", zap.Error(err))
			}
			return next, false
		}
	}
	return next, true
}

func (q *TimerQueue) reserveOverdueTokenLocked(now time.Time) time.Duration {
	if l := rate.Limit(q.cfg.overdueFireRate()); q.limiter.Limit() != l {
		q.limiter.SetLimitAt(now, l)
	}
	if b := q.cfg.overdueFireBurst(); q.limiter.Burst() != b {
		q.limiter.SetBurstAt(now, b)
	}
	return q.limiter.ReserveN(now, 1).DelayFrom(now)
}

func (q *TimerQueue) job(e *timerEntry) Job {
	return func(schedCtx context.Context) {
		ctx, exit, ok := q.jobs.enter(q.ctx, schedCtx)
		if !ok {
			return
		}
		defer exit()

		var err error
		if !e.executed {
			now := q.ts.Now()
			q.firedCounter.Inc(1)
			if e.attempts == 0 {
				q.lagTimer.Record(now.Sub(e.task.VisibilityTime))
			}
			if q.cfg.hooks.OnFired != nil {
				q.cfg.hooks.OnFired(e.task, e.attempts+1, now)
			}
			err = safeExecute(func() error { return q.exec.ExecuteTimer(ctx, e.task) })
			e.executed = err == nil
		}
		if isParked(err) {
			q.parkedCounter.Inc(1)
			logParked(q.logger, timerTaskFields(e.task), err)
			q.finish(e, nil)
			return
		}
		if err == nil {
			q.completer.add(e)
			return
		}
		q.finish(e, err)
	}
}

// finish records the outcome of one attempt. A failed task is never dropped: it goes back into
// the heap with a backoff.
func (q *TimerQueue) finish(e *timerEntry, err error) {
	if q.ctx.Err() != nil {
		// Stopping: the error is most likely the cancellation. The task stays in the store.
		return
	}
	q.mu.Lock()
	if err == nil {
		delete(q.known, mapKeyOf(e.key))
		q.forgetSingletonLocked(e)
		q.recent.add(mapKeyOf(e.key))
		if e.alerted {
			q.stuck--
		}
		q.shrinkLocked()
		needRead := q.moreToRead && readFits(true, len(q.known), q.cfg.maxInMemory(), q.cfg.pageSize())
		q.inMemoryGauge.Update(float64(len(q.known)))
		q.stuckGauge.Update(float64(q.stuck))
		q.mu.Unlock()

		if q.cfg.hooks.OnCompleted != nil {
			q.cfg.hooks.OnCompleted(e.task)
		}
		if needRead {
			q.wake()
		}
		return
	}

	if until, ok := asDeferred(err); ok {
		e.fireAt = until
		heap.Push(&q.pending, e)
		isHead := e.index == 0
		q.mu.Unlock()
		q.deferredCounter.Inc(1)
		if isHead {
			q.wake()
		}
		return
	}
	backoff, becameStuck := e.failed(q.cfg.retry)
	if becameStuck {
		q.stuck++
	}
	e.fireAt = q.ts.Now().Add(backoff)
	heap.Push(&q.pending, e)
	isHead := e.index == 0
	attempts := e.attempts
	if becameStuck {
		q.stuckGauge.Update(float64(q.stuck))
	}
	q.mu.Unlock()

	q.errorCounter.Inc(1)
	logRetry(q.logger, "timer", timerTaskFields(e.task), attempts, becameStuck, err)
	if q.cfg.hooks.OnFailed != nil {
		q.cfg.hooks.OnFailed(e.task, attempts, err)
	}
	if isHead {
		q.wake()
	}
}

// timerHeap orders entries by (fireAt, key).
type timerHeap []*timerEntry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if c := h[i].fireAt.Compare(h[j].fireAt); c != 0 {
		return c < 0
	}
	return h[i].key.Compare(h[j].key) < 0
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	e := x.(*timerEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
