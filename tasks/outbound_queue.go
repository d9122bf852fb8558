package tasks

import (
	"container/heap"
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/persistence"
)

// OutboundExecutor runs side-effect tasks. It is implemented by the history host.
type OutboundExecutor interface {
	// ExecuteOutbound delivers one task. nil = done (the queue deletes the task); an error =
	// retry later with backoff.
	ExecuteOutbound(ctx context.Context, task *persistence.OutboundTask) error
}

// OutboundQueue delivers one shard's outbound tasks. Tasks are read in TaskID order and grouped
// by Destination; each destination has its own bounded concurrency, so one that fails or is
// slow only delays its own tasks.
//
// It relies on outbound task IDs becoming visible in ID order: the read cursor only moves
// forward, so a task committed after a higher ID was already read would wait for the next
// restart. The history host allocates IDs and commits them in order per shard.
type OutboundQueue struct {
	shardID int32
	store   persistence.TaskStore
	// completer deletes executed tasks in batches and then lets them leave memory.
	completer *completer[*outboundEntry]
	exec      OutboundExecutor
	sched     *Scheduler
	ts        clock.TimeSource
	cfg       outboundQueueConfig
	logger    *zap.Logger

	attemptCounter tally.Counter
	failureCounter tally.Counter
	parkedCounter  tally.Counter
	readErrors     tally.Counter
	backlogGauge   tally.Gauge
	stuckGauge     tally.Gauge

	ctx       context.Context
	cancel    context.CancelFunc
	stopCh    chan struct{}
	doneCh    chan struct{}
	wakeCh    chan struct{}
	startOnce sync.Once
	stopOnce  sync.Once
	jobs      *jobTracker

	mu      sync.Mutex
	started bool
	dests   map[string]*destinationQueue
	// known holds every task in memory (waiting, executing or backing off).
	known  map[int64]*outboundEntry
	recent *recentSet[int64]
	// ready holds tasks that have a destination slot and wait for the loop to submit them. Only
	// the loop submits: a worker goroutine blocking on a full scheduler queue that only workers
	// drain would deadlock the pool.
	ready []*outboundEntry
	// held are background entries waiting for the host's calls (holdBackground); while any
	// is, a goroutine (releaseAfterYield) waits for the yield to release them.
	held          []*outboundEntry
	yielder       sync.WaitGroup // that goroutine; Stop waits for it
	retries       outboundRetryHeap
	cursor        int64
	moreToRead    bool
	readRequested bool
	// readGen changes when the cursor is moved back for an overflowed destination; a read in
	// flight under an older generation is discarded rather than moving the cursor forward again.
	readGen uint64
	stuck   int
}

type destinationQueue struct {
	name    string
	waiting []*outboundEntry
	// active counts tasks holding one of the destination's slots: executing, queued for the
	// scheduler, or waiting out a retry backoff. A failing task keeps its slot while it backs
	// off, so a destination that is down has at most DestinationConcurrency tasks retrying
	// against it instead of all of them.
	active int
	// overflowFrom is the lowest TaskID of this destination left in the store because it held
	// MaxPerDestination tasks already (0 = none).
	overflowFrom int64
}

func (d *destinationQueue) size() int { return len(d.waiting) + d.active }

type outboundEntry struct {
	task *persistence.OutboundTask
	dest *destinationQueue
	// released says the entry waited for the host's calls once (holdBackground): it goes
	// to the scheduler without waiting again.
	released bool
	retryState
	retryAt time.Time
	index   int
}

// NewOutboundQueue returns a stopped queue for one shard. It panics if opts holds an invalid
// (negative) setting.
func NewOutboundQueue(
	shardID int32,
	store persistence.TaskStore,
	exec OutboundExecutor,
	sched *Scheduler,
	ts clock.TimeSource,
	opts OutboundQueueOptions,
	logger *zap.Logger,
	scope tally.Scope,
) *OutboundQueue {
	cfg := opts.resolve()
	scope = scope.Tagged(map[string]string{metricTagQueue: "outbound"})
	// Gauges are per shard (a handful): with the same labels, shards would overwrite each other.
	shardScope := scope.Tagged(map[string]string{"shard": strconv.Itoa(int(shardID))})
	ctx, cancel := context.WithCancel(context.Background())
	q := &OutboundQueue{
		shardID:        shardID,
		store:          store,
		exec:           exec,
		sched:          sched,
		ts:             ts,
		cfg:            cfg,
		logger:         logger.With(zap.Int32("shard-id", shardID), zap.String("queue", "outbound")),
		attemptCounter: metrics.OutboundTaskAttempts.With(scope),
		failureCounter: metrics.OutboundTaskFailures.With(scope),
		parkedCounter:  metrics.TasksParked.With(scope),
		readErrors:     metrics.TaskReadErrors.With(scope),
		backlogGauge:   metrics.OutboundTaskBacklog.With(shardScope),
		stuckGauge:     metrics.OutboundTasksStuck.With(shardScope),
		ctx:            ctx,
		cancel:         cancel,
		stopCh:         make(chan struct{}),
		doneCh:         make(chan struct{}),
		wakeCh:         make(chan struct{}, 1),
		jobs:           newJobTracker(),
		dests:          make(map[string]*destinationQueue),
		known:          make(map[int64]*outboundEntry),
		recent:         newRecentSet[int64](cfg.recentlyCompleted),
		readRequested:  true,
	}
	q.completer = newCompleter(func(ctx context.Context, batch []*outboundEntry) error {
		ids := make([]int64, len(batch))
		for i, e := range batch {
			ids[i] = e.task.TaskID
		}
		return q.store.CompleteOutboundTasks(ctx, q.shardID, ids)
	}, func(e *outboundEntry) { q.finish(e, nil) }, cfg.retry, ts, q.logger)
	return q
}

// Start begins by reading every pending task from the start of the shard's outbound tasks: after
// a restart or a shard move, this is the recovery of everything the previous owner left.
func (q *OutboundQueue) Start() {
	q.startOnce.Do(func() {
		q.mu.Lock()
		q.started = true
		q.mu.Unlock()
		q.completer.start(q.ctx)
		go q.loop()
	})
}

// Stop stops reading and submitting, cancels executing tasks and waits for them to return.
func (q *OutboundQueue) Stop() {
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
		q.yielder.Wait() // Yield returns once q.ctx ends
		q.jobs.stopAndWait()
	})
}

// NotifyNewTasks signals that outbound tasks were committed, so the queue reads soon instead of
// at its next poll.
func (q *OutboundQueue) NotifyNewTasks() {
	q.mu.Lock()
	q.readRequested = true
	q.mu.Unlock()
	q.wake()
}

func (q *OutboundQueue) wake() {
	select {
	case q.wakeCh <- struct{}{}:
	default:
	}
}

func (q *OutboundQueue) shouldReadLocked() bool {
	return q.readRequested && readFits(q.moreToRead, len(q.known), q.cfg.maxInMemory(), q.cfg.pageSize())
}

func (q *OutboundQueue) loop() {
	defer close(q.doneCh)
	retryTimer := &rearmableTimer{ts: q.ts}
	pollTimer := &rearmableTimer{ts: q.ts}
	defer retryTimer.disarm()
	defer pollTimer.disarm()
	var nextPollAt time.Time
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
				q.logger.Warn("outbound queue read failed", zap.Error(err), zap.Int("attempt", readFailures))
				nextPollAt = readAt.Add(q.cfg.retry.backoff(readFailures))
			} else {
				readFailures = 0
				nextPollAt = readAt.Add(q.cfg.pollInterval())
			}
			continue
		}
		nextRetry, ok := q.submitReady()
		if !ok {
			return
		}
		retryC := retryTimer.arm(nextRetry)
		pollC := pollTimer.arm(nextPollAt)
		select {
		case <-q.stopCh:
			return
		case <-retryC:
			retryTimer.fired()
		case <-pollC:
			pollTimer.fired()
			q.mu.Lock()
			q.readRequested = true
			q.mu.Unlock()
		case <-q.wakeCh:
		}
	}
}

func (q *OutboundQueue) readPage() (readAt time.Time, err error) {
	q.mu.Lock()
	maxInMemory := q.cfg.maxInMemory()
	pageSize := min(q.cfg.pageSize(), maxInMemory-len(q.known))
	readAt = q.ts.Now()
	after := q.cursor
	gen := q.readGen
	q.readRequested = false
	q.mu.Unlock()

	page, err := q.store.GetOutboundTasks(q.ctx, q.shardID, after, pageSize)

	q.mu.Lock()
	if err != nil {
		q.mu.Unlock()
		return readAt, err
	}
	if gen != q.readGen {
		q.readRequested = true
		q.mu.Unlock()
		return readAt, nil
	}
	maxPerDest := q.cfg.maxPerDestination()
	cursor, stopped := after, false
	for _, t := range page {
		if _, ok := q.known[t.TaskID]; !ok && !q.recent.contains(t.TaskID) {
			if len(q.known) >= maxInMemory {
				stopped = true
				break
			}
			d := q.dests[t.Destination]
			if d == nil {
				d = &destinationQueue{name: t.Destination}
				q.dests[t.Destination] = d
			}
			if d.size() >= maxPerDest {
				// Leave it in the store: the cursor moves on so other destinations keep
				// flowing, and the cursor comes back here once this destination drains.
				if d.overflowFrom == 0 || t.TaskID < d.overflowFrom {
					d.overflowFrom = t.TaskID
				}
			} else {
				e := &outboundEntry{task: t, dest: d, index: -1}
				q.known[t.TaskID] = e
				d.waiting = append(d.waiting, e)
				q.fillSlotsLocked(d)
			}
		}
		cursor = t.TaskID
	}
	q.cursor = cursor
	q.moreToRead = stopped || len(page) == pageSize
	q.readRequested = q.moreToRead
	inMemory := len(q.known)
	q.backlogGauge.Update(float64(inMemory))
	q.mu.Unlock()

	if q.cfg.hooks.OnRead != nil {
		q.cfg.hooks.OnRead(len(page), inMemory)
	}
	return readAt, nil
}

// fillSlotsLocked moves waiting tasks of d into free slots, oldest first.
func (q *OutboundQueue) fillSlotsLocked(d *destinationQueue) {
	limit := q.cfg.destinationConcurrency()
	for d.active < limit && len(d.waiting) > 0 {
		e := d.waiting[0]
		d.waiting[0] = nil
		d.waiting = d.waiting[1:]
		d.active++
		q.ready = append(q.ready, e)
	}
}

// submitReady moves due retries to ready, submits everything ready and returns the next retry
// time. ok is false when the queue or the scheduler is stopping.
func (q *OutboundQueue) submitReady() (nextRetry time.Time, ok bool) {
	q.mu.Lock()
	now := q.ts.Now()
	for len(q.retries) > 0 && !q.retries[0].retryAt.After(now) {
		q.ready = append(q.ready, heap.Pop(&q.retries).(*outboundEntry))
	}
	if len(q.retries) > 0 {
		nextRetry = q.retries[0].retryAt
	}
	ready := q.ready
	q.ready = nil
	q.mu.Unlock()

	if q.cfg.yield != nil {
		ready = q.holdBackground(ready)
	}
	return nextRetry, q.submit(ready)
}

// holdBackground returns the entries of ready that go now, and holds the background ones
// (OutboundQueueOptions.Yields) until the host's calls have gone first (Yield): one goroutine
// waits for the yield, then hands every entry held meanwhile back to the loop, marked so that
// it does not wait again. The loop goes on submitting the others in the meantime.
func (q *OutboundQueue) holdBackground(ready []*outboundEntry) []*outboundEntry {
	now := ready[:0:0]
	q.mu.Lock()
	defer q.mu.Unlock()
	waiting := len(q.held) > 0 // a goroutine already waits for the yield
	for _, e := range ready {
		if e.released || (q.cfg.yields != nil && !q.cfg.yields(e.task)) {
			now = append(now, e)
			continue
		}
		q.held = append(q.held, e)
	}
	if !waiting && len(q.held) > 0 {
		q.yielder.Go(q.releaseAfterYield)
	}
	return now
}

func (q *OutboundQueue) releaseAfterYield() {
	q.cfg.yield(q.ctx)
	q.mu.Lock()
	for _, e := range q.held {
		e.released = true
	}
	q.ready = append(q.ready, q.held...)
	q.held = nil
	q.mu.Unlock()
	q.wake()
}

// submit hands entries to the scheduler; false when the queue or the scheduler is stopping.
func (q *OutboundQueue) submit(ready []*outboundEntry) bool {
	for _, e := range ready {
		if err := q.sched.Submit(q.ctx, q.job(e)); err != nil {
			if q.ctx.Err() == nil {
				q.logger.Error("outbound queue stopped: scheduler is not running", zap.Error(err))
			}
			return false
		}
	}
	return true
}

func (q *OutboundQueue) job(e *outboundEntry) Job {
	return func(schedCtx context.Context) {
		ctx, exit, ok := q.jobs.enter(q.ctx, schedCtx)
		if !ok {
			return
		}
		defer exit()

		var err error
		if !e.executed {
			q.attemptCounter.Inc(1)
			if q.cfg.hooks.OnAttempt != nil {
				q.cfg.hooks.OnAttempt(e.task, e.attempts+1)
			}
			err = safeExecute(func() error { return q.exec.ExecuteOutbound(ctx, e.task) })
			e.executed = err == nil
		}
		if isParked(err) {
			q.parkedCounter.Inc(1)
			logParked(q.logger, outboundTaskFields(e.task), err)
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

func (q *OutboundQueue) finish(e *outboundEntry, err error) {
	if q.ctx.Err() != nil {
		return
	}
	q.mu.Lock()
	if err == nil {
		d := e.dest
		delete(q.known, e.task.TaskID)
		q.recent.add(e.task.TaskID)
		if e.alerted {
			q.stuck--
		}
		d.active--
		q.fillSlotsLocked(d)
		if d.overflowFrom != 0 && d.size() < q.cfg.maxPerDestination()/2 {
			// The destination has drained: move the cursor back to its first task left in the
			// store. Tasks of other destinations read again on the way are deduplicated.
			if d.overflowFrom-1 < q.cursor {
				q.cursor = d.overflowFrom - 1
				q.readGen++
			}
			d.overflowFrom = 0
			q.moreToRead = true
			q.readRequested = true
		}
		if d.size() == 0 && d.overflowFrom == 0 {
			delete(q.dests, d.name)
		}
		q.backlogGauge.Update(float64(len(q.known)))
		q.stuckGauge.Update(float64(q.stuck))
		q.mu.Unlock()

		if q.cfg.hooks.OnCompleted != nil {
			q.cfg.hooks.OnCompleted(e.task)
		}
		q.wake()
		return
	}

	// The task keeps its destination slot while it backs off (see destinationQueue.active).
	backoff, becameStuck := e.failed(q.cfg.retry)
	if becameStuck {
		q.stuck++
	}
	e.retryAt = q.ts.Now().Add(backoff)
	heap.Push(&q.retries, e)
	isHead := e.index == 0
	attempts := e.attempts
	if becameStuck {
		q.stuckGauge.Update(float64(q.stuck))
	}
	q.mu.Unlock()

	q.failureCounter.Inc(1)
	logRetry(q.logger, "outbound", outboundTaskFields(e.task), attempts, becameStuck, err)
	if q.cfg.hooks.OnFailed != nil {
		q.cfg.hooks.OnFailed(e.task, attempts, err)
	}
	if isHead {
		q.wake()
	}
}

// outboundRetryHeap orders backing-off entries by retryAt.
type outboundRetryHeap []*outboundEntry

func (h outboundRetryHeap) Len() int           { return len(h) }
func (h outboundRetryHeap) Less(i, j int) bool { return h[i].retryAt.Before(h[j].retryAt) }
func (h outboundRetryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *outboundRetryHeap) Push(x any) {
	e := x.(*outboundEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *outboundRetryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
