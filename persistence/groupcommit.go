package persistence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/metrics"
)

// Defaults for GroupCommitOptions left nil (or returning a non-positive size).
const (
	// GroupCommitMaxBatchSizeDefault caps the writes sharing one transaction.
	GroupCommitMaxBatchSizeDefault = 256
	// GroupCommitMaxWaitDefault is the longest a write waits for company before its batch
	// commits.
	GroupCommitMaxWaitDefault = time.Millisecond
	// GroupCommitRateBatchSizeDefault is the batch a commit waits for at moderate rates
	// (GroupCommitOptions.RateWait).
	GroupCommitRateBatchSizeDefault = 16
	// GroupCommitCreateShare is the share of a batch kept for creates while updates wait
	// beyond it: enough that a burst of new executions keeps moving, small enough that the
	// updates of known ones (heartbeats) never queue behind it.
	GroupCommitCreateShare = 0.25
)

// Metric names, as common/metrics declares them.
var (
	metricGroupCommitBatchSize = metrics.GroupCommitBatchSize.Name()
	metricGroupCommitLatency   = metrics.GroupCommitLatency.Name()
	metricPersistenceErrors    = metrics.PersistenceErrors.Name()
)

var (
	// ErrGroupCommitterStopped is returned for writes submitted to, or still waiting in, a
	// stopped GroupCommitter. Such a write was never sent to the store.
	ErrGroupCommitterStopped = errors.New("persistence: group committer is stopped; the write was not applied")
	// ErrGroupCommitterNotStarted is returned for writes submitted before Start.
	ErrGroupCommitterNotStarted = errors.New("persistence: group committer is not started; the write was not applied")
)

// GroupCommitOptions tunes a GroupCommitter. The fields are functions so that dynamic config
// applies to the next batch without a restart.
type GroupCommitOptions struct {
	// MaxBatchSize caps the writes in one WriteBatch call. Nil or non-positive means
	// GroupCommitMaxBatchSizeDefault.
	MaxBatchSize func() int
	// MaxWait is how long after a write arrives its batch may wait for more writes. Nil means
	// GroupCommitMaxWaitDefault; zero or negative means never wait.
	MaxWait func() time.Duration
	// SiblingsWait is how long after its oldest write arrived a batch may wait for the writes
	// of calls still running upstream (ExpectWritesFrom), while there are any. Nil or
	// non-positive: never.
	SiblingsWait func() time.Duration
	// RateWait is the longest a batch waits for the company the recent arrival rate promises,
	// until it holds RateBatchSize writes. It waits only while that rate brings at least two
	// more writes within RateWait, so an idle or lightly used store adds nothing, and a busy
	// one batches through its commit time anyway: it is the moderate rates between, where
	// each commit would carry a few writes and pay its fixed cost (the transaction, the WAL
	// header, the fsync) for them, that it makes cheaper. Nil or non-positive: never.
	RateWait func() time.Duration
	// RateBatchSize is the batch RateWait waits for. Nil or non-positive:
	// GroupCommitRateBatchSizeDefault.
	RateBatchSize func() int
	// MaxInFlight is how many batches may be committing at once (read at Start). Nil or
	// below 1 means one: each batch starts once the previous one returned. A store whose
	// batches are independent transactions on their own connections (ConcurrentBatchWriter)
	// can take more, so that a batch's round trips and fsync overlap the next one's.
	MaxInFlight func() int
}

// ConcurrentBatchWriter is a Store that can run several WriteBatch calls at once, each its own
// transaction, and says how many.
//
// Concurrent batches are safe for the callers of GroupCommitter.Write: an execution has one
// write in flight at a time (its caller holds the execution's lock until Write returns), and
// a write abandoned by its caller's ctx while its batch commits is re-read before it is
// written again, whose conditional update (db_version) then waits for the first batch's row
// lock and sees its outcome. Fencing is per batch: each checks the shard's range_id.
type ConcurrentBatchWriter interface {
	MaxConcurrentBatches() int
}

// GroupCommitter funnels concurrent ExecutionWrites into shared WriteBatch calls, so that N
// concurrent heartbeats cost one transaction and one fsync instead of N.
//
// One goroutine gathers batches and starts their commits, at most MaxInFlight at a time (one by
// default). It takes the waiting writes and gathers more until the batch is full or MaxWait
// has passed since the oldest of them arrived. Writes that arrive while every slot is
// committing wait for the next batch: under load the next batch is already large (and its
// MaxWait already spent) when a commit returns, so batching comes from the commit time itself
// and adds no latency; an idle system adds at most MaxWait. Between the two, at a few hundred
// writes a second, a batch waits up to RateWait for RateBatchSize writes, which the recent
// arrival rate says will come: a commit's fixed cost is then shared by many writes, not two.
//
// Writes wait in two lanes: updates and deletes of existing executions (a known worker's
// heartbeat) and creates of new ones (a registration). A batch is filled from the update lane
// first, keeping GroupCommitCreateShare of it for creates while any wait; either lane takes
// the room the other leaves. So a burst of creates, however large, delays the updates behind
// it by at most a quarter of a batch, and is itself served at no less than that share. Each
// lane is FIFO. Reordering across lanes is safe: an execution has one write in flight at a
// time, so two queued writes never touch the same execution.
type GroupCommitter struct {
	store  Store
	opts   GroupCommitOptions
	logger *zap.Logger

	batchSize   tally.Histogram
	latency     tally.Timer
	batchErrors tally.Counter
	writeErrors tally.Counter

	// wake has room for one signal: a Write that finds it full knows the loop will look at
	// the queue anyway.
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	// slots holds one token per batch committing; its capacity is MaxInFlight.
	slots chan struct{}

	mu    sync.Mutex
	state committerState
	lanes [numLanes][]*pendingWrite // each in arrival order; guarded by mu

	startOnce sync.Once
	stopOnce  sync.Once

	// outstanding counts the writes handed in (Write) and not yet answered or withdrawn.
	outstanding atomic.Int64
	// expected, when set (ExpectWritesFrom), counts the calls upstream that will probably
	// hand in a write soon, outstanding ones included.
	expected atomic.Pointer[func() int]
	// arrivals counts the writes ever handed in; rate turns it into writes a second.
	arrivals atomic.Int64
	rate     arrivalRate // the loop's own

	testSignals groupCommitTestSignals
	// testNow, when set, is the clock of the arrival rate (tests).
	testNow func() time.Time
}

type committerState int

const (
	committerCreated committerState = iota
	committerStarted
	committerStopped
)

// lane is the queue a write waits in.
type lane int

const (
	laneUpdate lane = iota // updates and deletes of existing executions
	laneCreate             // creates of new executions
	numLanes
)

func laneOf(w *ExecutionWrite) lane {
	if w.Mode == WriteModeCreate {
		return laneCreate
	}
	return laneUpdate
}

// pendingWrite is one Write call waiting for its batch.
type pendingWrite struct {
	write    *ExecutionWrite
	arrived  time.Time
	result   chan error // buffered: the loop never blocks delivering
	taken    bool       // guarded by GroupCommitter.mu; set once it is in a batch
	canceled bool       // guarded by GroupCommitter.mu; set when its caller gave up first
}

// NewGroupCommitter returns a stopped GroupCommitter over store. Call Start before Write.
func NewGroupCommitter(store Store, opts GroupCommitOptions, logger *zap.Logger, scope tally.Scope) *GroupCommitter {
	if logger == nil {
		logger = zap.NewNop()
	}
	if scope == nil {
		scope = tally.NoopScope
	}
	return &GroupCommitter{
		store:       store,
		opts:        opts,
		logger:      logger,
		batchSize:   metrics.GroupCommitBatchSize.With(scope),
		latency:     metrics.GroupCommitLatency.With(scope),
		batchErrors: metrics.PersistenceErrors.With(scope, metrics.OperationTag("GroupCommitBatch")),
		writeErrors: metrics.PersistenceErrors.With(scope, metrics.OperationTag("GroupCommitWrite")),
		wake:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
}

// Start launches the commit loop. Calling it again, or after Stop, does nothing.
func (g *GroupCommitter) Start() {
	g.startOnce.Do(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.state != committerCreated {
			return
		}
		g.state = committerStarted
		n := 1
		if g.opts.MaxInFlight != nil {
			n = max(1, g.opts.MaxInFlight())
		}
		g.slots = make(chan struct{}, n)
		go g.loop()
	})
}

// Stop fails every write not yet taken into a batch with ErrGroupCommitterStopped, waits for
// the batch being committed (if any) to finish and deliver its results, and returns once the
// commit loop has exited. Later Writes fail with ErrGroupCommitterStopped. Stop is idempotent.
func (g *GroupCommitter) Stop() {
	g.stopOnce.Do(func() {
		g.mu.Lock()
		wasStarted := g.state == committerStarted
		g.state = committerStopped
		// Fail the queue here rather than in the loop: the loop may be inside a slow commit,
		// and these writers should hear now, not after it.
		abandoned := g.takeAllPendingLocked()
		g.mu.Unlock()
		for _, p := range abandoned {
			g.answer(p, ErrGroupCommitterStopped)
		}
		close(g.stop)
		if wasStarted {
			<-g.done
		}
	})
}

// Write submits w and blocks until the batch holding it committed or failed, returning w's own
// result (nil, one of the store's per-write errors, or the batch's error).
//
// Cancellation: while w is still waiting for a batch, a cancelled ctx withdraws it and Write
// returns ctx.Err(); it is never applied. Once w is in a batch its outcome is the batch's:
// Write still returns ctx.Err() at once, but w may commit anyway, as with any database write
// whose caller stops waiting. Callers that must know re-read (the execution's DBVersion says).
//
// The caller must not modify w until Write returns, nor afterwards if Write returned ctx.Err()
// (the batch may still be reading it).
func (g *GroupCommitter) Write(ctx context.Context, w *ExecutionWrite) error {
	if w == nil {
		return errors.New("persistence: group commit: nil write")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p := &pendingWrite{write: w, arrived: time.Now(), result: make(chan error, 1)}
	g.mu.Lock()
	switch g.state {
	case committerCreated:
		g.mu.Unlock()
		return ErrGroupCommitterNotStarted
	case committerStopped:
		g.mu.Unlock()
		return ErrGroupCommitterStopped
	}
	l := laneOf(w)
	g.lanes[l] = append(g.lanes[l], p)
	g.outstanding.Add(1)
	g.arrivals.Add(1)
	g.mu.Unlock()
	g.testSignals.queued.signal()
	select {
	case g.wake <- struct{}{}:
	default:
	}

	select {
	case err := <-p.result:
		return err
	case <-ctx.Done():
		g.mu.Lock()
		if !p.taken {
			// Still queued: withdraw it. The loop drops canceled entries when it reaches them.
			p.canceled = true
			g.outstanding.Add(-1)
			g.mu.Unlock()
			return ctx.Err()
		}
		g.mu.Unlock()
		// In a batch (or already answered): the result is no longer ours to decide.
		select {
		case err := <-p.result:
			return err
		default:
			return ctx.Err()
		}
	}
}

// ExpectWritesFrom tells the committer how many writers are running upstream (for the history
// host, its admitted heartbeats and registrations), whether or not they have handed in their
// write yet. While some have not, a batch waits for them, up to SiblingsWait after its oldest
// write arrived: as PostgreSQL's commit_delay waits only with commit_siblings active
// transactions, an idle server adds no latency, and a loaded one commits in large batches.
// On a CPU-bound host the batch's fixed cost (the WAL's pages, the fsync) was paid every two
// or three heartbeats otherwise. It may be called at any time.
func (g *GroupCommitter) ExpectWritesFrom(writers func() int) { g.expected.Store(&writers) }

// writersToCome is how many expected writes have not been handed in yet.
func (g *GroupCommitter) writersToCome() int {
	fn := g.expected.Load()
	if fn == nil {
		return 0
	}
	return (*fn)() - int(g.outstanding.Load())
}

func (g *GroupCommitter) siblingsWait() time.Duration {
	if g.opts.SiblingsWait == nil {
		return 0
	}
	return g.opts.SiblingsWait()
}

func (g *GroupCommitter) maxBatchSize() int {
	if g.opts.MaxBatchSize != nil {
		if n := g.opts.MaxBatchSize(); n > 0 {
			return n
		}
	}
	return GroupCommitMaxBatchSizeDefault
}

func (g *GroupCommitter) maxWait() time.Duration {
	if g.opts.MaxWait != nil {
		return g.opts.MaxWait()
	}
	return GroupCommitMaxWaitDefault
}

func (g *GroupCommitter) rateBatchSize() int {
	if g.opts.RateBatchSize != nil {
		if n := g.opts.RateBatchSize(); n > 0 {
			return n
		}
	}
	return GroupCommitRateBatchSizeDefault
}

// rateWait is how long a batch holding have writes may wait, after its oldest write arrived,
// for target: RateWait while the recent arrival rate brings at least two more writes in that
// time, else nothing.
func (g *GroupCommitter) rateWait(have, target int) time.Duration {
	if g.opts.RateWait == nil || have >= target {
		return 0
	}
	limit := g.opts.RateWait()
	if limit <= 0 {
		return 0
	}
	if g.rate.perSecond(g.rateNow(), g.arrivals.Load())*limit.Seconds() < 2 {
		return 0
	}
	return limit
}

func (g *GroupCommitter) rateNow() time.Time {
	if g.testNow != nil {
		return g.testNow()
	}
	return time.Now()
}

// arrivalRateWindow is the shortest span arrivalRate measures over: long enough to hold many
// writes at the rates RateWait is for, short enough to follow a fleet that grows or goes.
const arrivalRateWindow = 100 * time.Millisecond

// arrivalRate measures writes a second over spans of at least arrivalRateWindow, each from
// the end of the last: after an idle hour the first span is that hour, and its rate is low.
type arrivalRate struct {
	at    time.Time
	count int64
	rate  float64
}

// perSecond returns the rate measured over the last full span, given the count of arrivals so
// far at now; the first call only starts the span.
func (r *arrivalRate) perSecond(now time.Time, count int64) float64 {
	if r.at.IsZero() {
		r.at, r.count = now, count
		return 0
	}
	if span := now.Sub(r.at); span >= arrivalRateWindow {
		r.rate = float64(count-r.count) / span.Seconds()
		r.at, r.count = now, count
	}
	return r.rate
}

func (g *GroupCommitter) loop() {
	var committing sync.WaitGroup
	defer func() {
		committing.Wait() // Stop returns once every batch in flight delivered its results
		close(g.done)
	}()
	for {
		select {
		case <-g.stop:
			return
		case <-g.wake:
		}
		// Drain: keep committing while writes are waiting, without another wake signal.
		for {
			// A free slot first: the writes arriving meanwhile join the batch gathered next.
			select {
			case <-g.stop:
				return
			case g.slots <- struct{}{}:
			}
			batch, ok := g.gather()
			if !ok {
				<-g.slots
				// Stopped while gathering: the taken writes were never sent.
				for _, p := range batch {
					g.answer(p, ErrGroupCommitterStopped)
				}
				return
			}
			if len(batch) == 0 {
				<-g.slots
				break
			}
			committing.Go(func() {
				defer func() { <-g.slots }()
				g.commit(batch)
			})
		}
	}
}

// gather takes the writes for the next batch. It returns ok=false if Stop was called.
func (g *GroupCommitter) gather() (batch []*pendingWrite, ok bool) {
	maxSize := g.maxBatchSize()
	batch = g.take(nil, maxSize)
	if len(batch) == 0 || len(batch) >= maxSize {
		return batch, true
	}
	// Wait for company until MaxWait after the oldest write arrived; while the arrival rate
	// promises it, until RateWait or RateBatchSize writes; and while writers are still
	// running upstream (ExpectWritesFrom), until SiblingsWait. After a long commit those
	// deadlines have usually passed already, and the batch goes out at once.
	oldest := batch[0].arrived
	for _, p := range batch[1:] {
		if p.arrived.Before(oldest) {
			oldest = p.arrived
		}
	}
	deadline := oldest.Add(g.maxWait())
	siblingsDeadline := oldest.Add(g.siblingsWait())
	rateTarget := min(maxSize, g.rateBatchSize())
	rateDeadline := oldest.Add(g.rateWait(len(batch), rateTarget))

	for len(batch) < maxSize {
		until, polling := deadline, false
		if len(batch) < rateTarget && rateDeadline.After(until) {
			until = rateDeadline
		}
		if siblingsDeadline.After(until) && g.writersToCome() > 0 {
			until, polling = siblingsDeadline, true
		}
		remaining := time.Until(until)
		if remaining <= 0 {
			break
		}
		if polling {
			// The writers counted may finish without handing in a write (their write was
			// answered, or they had none): look again soon rather than wait out the deadline.
			remaining = min(remaining, siblingsPoll)
		}
		timer := time.NewTimer(remaining)
		select {
		case <-g.stop:
			timer.Stop()
			return batch, false
		case <-g.wake:
			timer.Stop()
			batch = g.take(batch, maxSize)
		case <-timer.C:
			batch = g.take(batch, maxSize)
			if !polling {
				return batch, true
			}
		}
	}
	return batch, true
}

// take moves queued, uncancelled writes into batch, up to maxSize in all: updates first,
// creates into the room kept for them (GroupCommitCreateShare), then whatever room is left
// to either lane.
func (g *GroupCommitter) take(batch []*pendingWrite, maxSize int) []*pendingWrite {
	g.mu.Lock()
	defer g.mu.Unlock()
	creates := 0
	for _, p := range batch {
		if laneOf(p.write) == laneCreate {
			creates++
		}
	}
	createRoom := max(0, max(1, int(float64(maxSize)*GroupCommitCreateShare))-creates)
	reserved := min(createRoom, len(g.lanes[laneCreate]))
	batch = g.takeLaneLocked(laneUpdate, batch, maxSize-reserved)
	batch = g.takeLaneLocked(laneCreate, batch, maxSize)
	// The create lane may have held cancelled writes, leaving room for more updates.
	return g.takeLaneLocked(laneUpdate, batch, maxSize)
}

// takeLaneLocked moves l's uncancelled writes into batch until it holds limit writes.
func (g *GroupCommitter) takeLaneLocked(l lane, batch []*pendingWrite, limit int) []*pendingWrite {
	queue := g.lanes[l]
	i := 0
	for ; i < len(queue) && len(batch) < limit; i++ {
		p := queue[i]
		if p.canceled {
			continue
		}
		p.taken = true
		batch = append(batch, p)
	}
	// Shift rather than reslice so the backing array does not pin taken writes.
	n := copy(queue, queue[i:])
	clear(queue[n:])
	g.lanes[l] = queue[:n]
	return batch
}

func (g *GroupCommitter) takeAllPendingLocked() []*pendingWrite {
	var out []*pendingWrite
	for l := range g.lanes {
		for _, p := range g.lanes[l] {
			if !p.canceled {
				p.taken = true
				out = append(out, p)
			}
		}
		g.lanes[l] = nil
	}
	return out
}

// commit runs one WriteBatch and hands each writer its result.
func (g *GroupCommitter) commit(batch []*pendingWrite) {
	writes := make([]*ExecutionWrite, len(batch))
	for i, p := range batch {
		writes[i] = p.write
	}
	g.testSignals.committing.signal()
	g.batchSize.RecordValue(float64(len(batch)))
	start := time.Now()
	// The batch belongs to many callers, so no single caller's ctx may cancel it; Stop waits
	// for it instead. The store's own timeouts (busy_timeout, statement timeouts) bound it.
	results, err := g.store.WriteBatch(context.Background(), writes)
	g.latency.Record(time.Since(start))
	if err == nil && len(results) != len(writes) {
		err = fmt.Errorf("persistence: group commit: store returned %d results for %d writes", len(results), len(writes))
	}
	if err != nil {
		g.batchErrors.Inc(1)
		g.logger.Warn("group commit batch failed", zap.Int("batch-size", len(batch)), zap.Error(err))
		for _, p := range batch {
			g.answer(p, err)
		}
		return
	}
	for i, p := range batch {
		if results[i] != nil {
			g.writeErrors.Inc(1)
		}
		g.answer(p, results[i])
	}
}

// siblingsPoll is how often a batch waiting for expected writers looks again whether any is
// still to come.
const siblingsPoll = 200 * time.Microsecond

// answer delivers a write's outcome. It stops counting as outstanding at once, before its
// caller runs again: on a busy CPU that can take a while, and a batch gathered meanwhile must
// not wait for it.
func (g *GroupCommitter) answer(p *pendingWrite, err error) {
	g.outstanding.Add(-1)
	p.result <- err
}

// groupCommitTestSignals let tests wait for an event instead of sleeping. They are nil (and
// free) unless a test initializes them.
type groupCommitTestSignals struct {
	queued     testSignal // a write joined the queue
	committing testSignal // a batch is about to be sent to the store
}

type testSignal chan struct{}

func (s testSignal) signal() {
	if s == nil {
		return
	}
	select {
	case s <- struct{}{}:
	default:
		panic("persistence: test signal buffer full; size it for the test")
	}
}
