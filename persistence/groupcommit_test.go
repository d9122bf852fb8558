package persistence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap/zaptest"
)

// fakeStore records WriteBatch calls. Its per-write outcome is chosen by the write's BusinessID
// (see result); gate, when set, holds every WriteBatch until the test sends on it.
type fakeStore struct {
	Store // nil: only WriteBatch is used

	gate     chan struct{}
	batchErr error

	mu      sync.Mutex
	batches [][]*ExecutionWrite
	applied map[string]bool
}

func newFakeStore() *fakeStore {
	return &fakeStore{applied: map[string]bool{}}
}

func (f *fakeStore) WriteBatch(ctx context.Context, writes []*ExecutionWrite) ([]error, error) {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, writes)
	if f.batchErr != nil {
		return nil, f.batchErr
	}
	results := make([]error, len(writes))
	for i, w := range writes {
		results[i] = result(w)
		if results[i] == nil {
			f.applied[w.Key.BusinessID] = true
		}
	}
	return results, nil
}

// result fails writes whose business ID starts with "fail-", each with its own error.
func result(w *ExecutionWrite) error {
	if strings.HasPrefix(w.Key.BusinessID, "fail-") {
		return &ConditionFailedError{Key: w.Key, ExpectedVersion: w.PrevDBVersion, ActualVersion: 1000}
	}
	return nil
}

func (f *fakeStore) batchSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	sizes := make([]int, len(f.batches))
	for i, b := range f.batches {
		sizes[i] = len(b)
	}
	return sizes
}

func (f *fakeStore) wasApplied(businessID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied[businessID]
}

func (f *fakeStore) sawWrite(businessID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.batches {
		for _, w := range b {
			if w.Key.BusinessID == businessID {
				return true
			}
		}
	}
	return false
}

func testWrite(businessID string) *ExecutionWrite {
	return &ExecutionWrite{
		ShardID: 1, RangeID: 1, Mode: WriteModeUpdate,
		Key:           ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: businessID, RunID: "r"},
		PrevDBVersion: 1, NextDBVersion: 2,
	}
}

// newTestCommitter returns a started committer with test signals sized for signalBuffer
// events; it is stopped at cleanup.
func newTestCommitter(t *testing.T, store Store, opts GroupCommitOptions, signalBuffer int) *GroupCommitter {
	g := NewGroupCommitter(store, opts, zaptest.NewLogger(t), tally.NoopScope)
	g.testSignals.queued = make(testSignal, signalBuffer)
	g.testSignals.committing = make(testSignal, signalBuffer)
	g.Start()
	t.Cleanup(g.Stop)
	return g
}

func waitSignal(t *testing.T, s testSignal, what string) {
	t.Helper()
	select {
	case <-s:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

type writeOutcome struct {
	businessID string
	err        error
}

// goWrite runs Write in a goroutine and delivers its outcome on out.
func goWrite(ctx context.Context, g *GroupCommitter, businessID string, out chan<- writeOutcome) {
	go func() {
		out <- writeOutcome{businessID, g.Write(ctx, testWrite(businessID))}
	}()
}

func TestGroupCommitter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ConcurrentWritesShareBatches", func(t *testing.T) {
		t.Parallel()
		const writers = 200
		store := newFakeStore()
		store.gate = make(chan struct{})
		g := newTestCommitter(t, store, GroupCommitOptions{}, writers+10)

		out := make(chan writeOutcome, writers)
		goWrite(ctx, g, "w-first", out)
		// Hold the first batch in the store while everyone else queues behind it.
		waitSignal(t, g.testSignals.committing, "first batch")
		for i := 1; i < writers; i++ {
			goWrite(ctx, g, fmt.Sprintf("w-%d", i), out)
		}
		for i := 0; i < writers; i++ {
			waitSignal(t, g.testSignals.queued, "writes to queue")
		}
		close(store.gate)

		for range writers {
			o := <-out
			require.NoError(t, o.err, o.businessID)
			require.True(t, store.wasApplied(o.businessID), "%s acknowledged but not applied", o.businessID)
		}
		sizes := store.batchSizes()
		total := 0
		for _, n := range sizes {
			total += n
		}
		require.Equal(t, writers, total, "every write sent exactly once")
		require.Less(t, len(sizes), writers)
		require.LessOrEqual(t, len(sizes), 2, "the writes queued during the first commit share the second: %v", sizes)
	})

	t.Run("PerWriteErrorsReachTheirCaller", func(t *testing.T) {
		t.Parallel()
		const writers = 64
		store := newFakeStore()
		g := newTestCommitter(t, store, GroupCommitOptions{}, 4*writers)

		var wg sync.WaitGroup
		for i := range writers {
			id := fmt.Sprintf("ok-%d", i)
			if i%3 == 0 {
				id = fmt.Sprintf("fail-%d", i)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := testWrite(id)
				err := g.Write(ctx, w)
				if strings.HasPrefix(id, "fail-") {
					var cf *ConditionFailedError
					if !errors.As(err, &cf) || cf.Key != w.Key {
						t.Errorf("%s: got %v, want its own ConditionFailedError", id, err)
					}
					return
				}
				if err != nil {
					t.Errorf("%s: %v", id, err)
				}
			}()
		}
		wg.Wait()
	})

	t.Run("BatchErrorReachesEveryWriter", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		store.batchErr = errors.New("disk on fire")
		g := newTestCommitter(t, store, GroupCommitOptions{}, 100)
		out := make(chan writeOutcome, 10)
		for i := range 10 {
			goWrite(ctx, g, fmt.Sprintf("w-%d", i), out)
		}
		for range 10 {
			require.ErrorIs(t, (<-out).err, store.batchErr)
		}
	})

	t.Run("RespectsMaxBatchSize", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		store.gate = make(chan struct{})
		size := 3
		var sizeMu sync.Mutex
		opts := GroupCommitOptions{
			MaxBatchSize: func() int { sizeMu.Lock(); defer sizeMu.Unlock(); return size },
			MaxWait:      func() time.Duration { return 0 },
		}
		g := newTestCommitter(t, store, opts, 100)

		out := make(chan writeOutcome, 20)
		goWrite(ctx, g, "w-first", out)
		waitSignal(t, g.testSignals.committing, "first batch")
		for i := range 10 {
			goWrite(ctx, g, fmt.Sprintf("w-%d", i), out)
			waitSignal(t, g.testSignals.queued, "write to queue")
		}
		waitSignal(t, g.testSignals.queued, "first write queued") // the first write's own signal
		sizeMu.Lock()
		size = 4 // dynamic config applies to the next batch
		sizeMu.Unlock()
		close(store.gate)
		for range 11 {
			require.NoError(t, (<-out).err)
		}
		require.Equal(t, []int{1, 4, 4, 2}, store.batchSizes())
	})

	t.Run("CanceledBeforeBatchIsWithdrawn", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		store.gate = make(chan struct{})
		g := newTestCommitter(t, store, GroupCommitOptions{}, 100)

		out := make(chan writeOutcome, 3)
		goWrite(ctx, g, "w-first", out)
		waitSignal(t, g.testSignals.committing, "first batch")
		waitSignal(t, g.testSignals.queued, "first write queued")

		cctx, cancel := context.WithCancel(ctx)
		goWrite(cctx, g, "w-canceled", out)
		waitSignal(t, g.testSignals.queued, "canceled write queued")
		cancel()
		o := <-out
		require.Equal(t, "w-canceled", o.businessID)
		require.ErrorIs(t, o.err, context.Canceled)

		goWrite(ctx, g, "w-after", out)
		waitSignal(t, g.testSignals.queued, "later write queued")
		close(store.gate)
		for range 2 {
			require.NoError(t, (<-out).err)
		}
		require.False(t, store.sawWrite("w-canceled"), "a write withdrawn before its batch is never sent")
		require.True(t, store.wasApplied("w-after"))
	})

	t.Run("CanceledAfterBatchStillCommits", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		store.gate = make(chan struct{})
		g := newTestCommitter(t, store, GroupCommitOptions{}, 100)

		cctx, cancel := context.WithCancel(ctx)
		out := make(chan writeOutcome, 1)
		goWrite(cctx, g, "w-taken", out)
		waitSignal(t, g.testSignals.committing, "batch")
		cancel()
		require.ErrorIs(t, (<-out).err, context.Canceled)
		close(store.gate)
		g.Stop() // waits for the batch in flight
		require.True(t, store.wasApplied("w-taken"), "once in a batch, the batch decides")
	})

	t.Run("MaxInFlightBatchesCommitAtOnce", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		store.gate = make(chan struct{})
		g := newTestCommitter(t, store, GroupCommitOptions{MaxInFlight: func() int { return 2 }}, 100)

		out := make(chan writeOutcome, 3)
		goWrite(ctx, g, "w-1", out)
		waitSignal(t, g.testSignals.committing, "first batch")
		goWrite(ctx, g, "w-2", out)
		waitSignal(t, g.testSignals.committing, "second batch, while the first is still committing")
		goWrite(ctx, g, "w-3", out)
		waitSignal(t, g.testSignals.queued, "w-1 queued")
		waitSignal(t, g.testSignals.queued, "w-2 queued")
		waitSignal(t, g.testSignals.queued, "w-3 queued")
		select {
		case <-g.testSignals.committing:
			t.Fatal("a third batch started with two in flight")
		case <-time.After(50 * time.Millisecond):
		}
		store.gate <- struct{}{} // one of the two returns: w-3's batch may start
		waitSignal(t, g.testSignals.committing, "third batch, once a slot is free")
		close(store.gate)
		for range 3 {
			require.NoError(t, (<-out).err)
		}
		require.Equal(t, []int{1, 1, 1}, store.batchSizes())
	})

	t.Run("OneBatchAtATimeByDefault", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		store.gate = make(chan struct{})
		g := newTestCommitter(t, store, GroupCommitOptions{}, 100)

		out := make(chan writeOutcome, 3)
		goWrite(ctx, g, "w-1", out)
		waitSignal(t, g.testSignals.committing, "first batch")
		goWrite(ctx, g, "w-2", out)
		goWrite(ctx, g, "w-3", out)
		for range 3 {
			waitSignal(t, g.testSignals.queued, "write queued")
		}
		store.gate <- struct{}{}
		require.NoError(t, (<-out).err)
		waitSignal(t, g.testSignals.committing, "second batch, after the first returned")
		close(store.gate)
		for range 2 {
			require.NoError(t, (<-out).err)
		}
		require.Equal(t, []int{1, 2}, store.batchSizes(), "the writes that arrived during the commit share the next batch")
	})

	t.Run("StopFailsPendingWrites", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		store.gate = make(chan struct{})
		g := newTestCommitter(t, store, GroupCommitOptions{}, 100)

		inFlight := make(chan writeOutcome, 1)
		goWrite(ctx, g, "w-in-flight", inFlight)
		waitSignal(t, g.testSignals.committing, "batch")
		waitSignal(t, g.testSignals.queued, "in-flight write queued")

		pending := make(chan writeOutcome, 5)
		for i := range 5 {
			goWrite(ctx, g, fmt.Sprintf("w-pending-%d", i), pending)
			waitSignal(t, g.testSignals.queued, "pending write queued")
		}

		stopped := make(chan struct{})
		go func() {
			g.Stop()
			close(stopped)
		}()
		// Pending writers hear at once, while the batch in flight is still stuck.
		for range 5 {
			require.ErrorIs(t, (<-pending).err, ErrGroupCommitterStopped)
		}
		select {
		case <-stopped:
			t.Fatal("Stop returned while a batch was still committing")
		default:
		}
		close(store.gate)
		<-stopped
		require.NoError(t, (<-inFlight).err, "the batch in flight completes")
		require.Equal(t, []int{1}, store.batchSizes())

		require.ErrorIs(t, g.Write(ctx, testWrite("w-late")), ErrGroupCommitterStopped)
		g.Stop() // idempotent
	})

	t.Run("WriteBeforeStartIsRefused", func(t *testing.T) {
		t.Parallel()
		g := NewGroupCommitter(newFakeStore(), GroupCommitOptions{}, nil, nil)
		require.ErrorIs(t, g.Write(ctx, testWrite("w")), ErrGroupCommitterNotStarted)
		g.Stop() // never started: returns at once
		g.Start()
		require.ErrorIs(t, g.Write(ctx, testWrite("w")), ErrGroupCommitterStopped)
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		for range 50 {
			store := newFakeStore()
			g := NewGroupCommitter(store, GroupCommitOptions{}, nil, nil)
			g.Start()
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := g.Write(ctx, testWrite(fmt.Sprintf("w-%d", i)))
					if err != nil && !errors.Is(err, ErrGroupCommitterStopped) {
						t.Errorf("unexpected error: %v", err)
					}
					if err == nil && !store.wasApplied(fmt.Sprintf("w-%d", i)) {
						t.Errorf("w-%d acknowledged but not applied", i)
					}
				}()
			}
			g.Stop()
			wg.Wait()
		}
	})

	t.Run("EmitsMetrics", func(t *testing.T) {
		t.Parallel()
		scope := tally.NewTestScope("", nil)
		store := newFakeStore()
		g := NewGroupCommitter(store, GroupCommitOptions{}, nil, scope)
		g.Start()
		defer g.Stop()
		require.NoError(t, g.Write(ctx, testWrite("ok")))
		require.Error(t, g.Write(ctx, testWrite("fail-1")))

		snap := scope.Snapshot()
		var histograms, timers int
		for _, h := range snap.Histograms() {
			if h.Name() == metricGroupCommitBatchSize {
				histograms++
			}
		}
		for _, tm := range snap.Timers() {
			if tm.Name() == metricGroupCommitLatency {
				timers += len(tm.Values())
			}
		}
		var writeErrors int64
		for _, c := range snap.Counters() {
			if c.Name() == metricPersistenceErrors && c.Tags()["operation"] == "GroupCommitWrite" {
				writeErrors += c.Value()
			}
		}
		require.Equal(t, 1, histograms)
		require.Equal(t, 2, timers)
		require.Equal(t, int64(1), writeErrors)
	})
}

func testCreate(businessID string) *ExecutionWrite {
	w := testWrite(businessID)
	w.Mode, w.PrevDBVersion, w.NextDBVersion = WriteModeCreate, 0, 1
	return w
}

func TestGroupCommitterLanes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// queueBehindABatch holds a first batch in the store, queues the given writes behind it
	// (in that order), then lets every batch through and returns the batches as committed.
	queueBehindABatch := func(t *testing.T, maxSize int, writes []*ExecutionWrite) [][]*ExecutionWrite {
		t.Helper()
		store := newFakeStore()
		store.gate = make(chan struct{})
		g := newTestCommitter(t, store, GroupCommitOptions{
			MaxBatchSize: func() int { return maxSize },
			MaxWait:      func() time.Duration { return 0 },
		}, len(writes)+10)
		errs := make(chan error, len(writes)+1)
		go func() { errs <- g.Write(ctx, testWrite("first")) }()
		waitSignal(t, g.testSignals.committing, "first batch")
		waitSignal(t, g.testSignals.queued, "first write queued")
		for _, w := range writes {
			go func() { errs <- g.Write(ctx, w) }()
			waitSignal(t, g.testSignals.queued, "write to queue")
		}
		close(store.gate)
		for range len(writes) + 1 {
			require.NoError(t, <-errs)
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.batches[1:]
	}
	modes := func(batch []*ExecutionWrite) (creates, updates int) {
		for _, w := range batch {
			if w.Mode == WriteModeCreate {
				creates++
			} else {
				updates++
			}
		}
		return creates, updates
	}

	t.Run("UpdatesGoAheadOfABurstOfCreates", func(t *testing.T) {
		t.Parallel()
		var writes []*ExecutionWrite
		for i := range 20 {
			writes = append(writes, testCreate(fmt.Sprintf("new-%d", i)))
		}
		for i := range 6 {
			writes = append(writes, testWrite(fmt.Sprintf("known-%d", i)))
		}
		batches := queueBehindABatch(t, 8, writes)
		// 8 per batch, 2 kept for creates: the 6 updates that came last all go in the first
		// batch, then the creates fill whole batches.
		require.Len(t, batches, 4)
		creates, updates := modes(batches[0])
		require.Equal(t, 6, updates, "every update queued behind the burst rides the next batch")
		require.Equal(t, 2, creates, "the burst keeps its share")
		for _, b := range batches[1:3] {
			creates, updates := modes(b)
			require.Equal(t, []int{8, 0}, []int{creates, updates})
		}
		creates, _ = modes(batches[3])
		require.Equal(t, 2, creates)
		for i, w := range batches[0][:6] {
			require.Equal(t, fmt.Sprintf("known-%d", i), w.Key.BusinessID, "each lane stays in arrival order")
		}
		require.Equal(t, "new-0", batches[0][6].Key.BusinessID)
	})

	t.Run("CreatesNeverStarveUnderAFloodOfUpdates", func(t *testing.T) {
		t.Parallel()
		var writes []*ExecutionWrite
		for i := range 3 {
			writes = append(writes, testCreate(fmt.Sprintf("new-%d", i)))
		}
		for i := range 30 {
			writes = append(writes, testWrite(fmt.Sprintf("known-%d", i)))
		}
		batches := queueBehindABatch(t, 8, writes)
		// Each batch carries 2 creates while they wait: all 3 are in the first two batches.
		creates0, updates0 := modes(batches[0])
		creates1, updates1 := modes(batches[1])
		require.Equal(t, []int{2, 6}, []int{creates0, updates0})
		require.Equal(t, []int{1, 7}, []int{creates1, updates1})
		for _, b := range batches[2:] {
			creates, _ := modes(b)
			require.Zero(t, creates)
		}
	})

	t.Run("ALoneLaneTakesTheWholeBatch", func(t *testing.T) {
		t.Parallel()
		var writes []*ExecutionWrite
		for i := range 16 {
			writes = append(writes, testCreate(fmt.Sprintf("new-%d", i)))
		}
		batches := queueBehindABatch(t, 8, writes)
		require.Len(t, batches, 2)
		require.Len(t, batches[0], 8)
		require.Len(t, batches[1], 8)
	})
}

func TestGroupCommitterWaitsForExpectedWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	long := func() time.Duration { return time.Hour }
	none := func() time.Duration { return 0 } // MaxWait: no wait of its own

	t.Run("ABatchWaitsForTheWritesOfRunningCalls", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		g := newTestCommitter(t, store, GroupCommitOptions{MaxWait: none, SiblingsWait: long}, 10)
		// Three calls are running upstream; their writes arrive one after the other.
		var running atomic.Int64
		running.Store(3)
		g.ExpectWritesFrom(func() int { return int(running.Load()) })
		out := make(chan writeOutcome, 3)
		for i := range 3 {
			goWrite(ctx, g, fmt.Sprintf("w-%d", i), out)
			waitSignal(t, g.testSignals.queued, "write queued")
			// The committer has taken it: a batch would go out now if it did not wait.
			require.Eventually(t, func() bool {
				g.mu.Lock()
				defer g.mu.Unlock()
				return len(g.lanes[laneUpdate]) == 0
			}, 10*time.Second, time.Millisecond)
		}
		for range 3 {
			require.NoError(t, (<-out).err)
		}
		require.Equal(t, []int{3}, store.batchSizes(), "one commit for the three")
	})

	t.Run("ALoneWriterDoesNotWait", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		g := newTestCommitter(t, store, GroupCommitOptions{MaxWait: none, SiblingsWait: long}, 10)
		g.ExpectWritesFrom(func() int { return 1 }) // the write's own call
		out := make(chan writeOutcome, 1)
		goWrite(ctx, g, "alone", out)
		select {
		case o := <-out:
			require.NoError(t, o.err)
		case <-time.After(30 * time.Second):
			t.Fatal("a lone write waited for writers that do not exist")
		}
	})
}

func TestGroupCommitterWaitsForTheCompanyItsRatePromises(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hour := func() time.Duration { return time.Hour }
	four := func() int { return 4 }

	// newRated returns a started committer whose arrival rate reads the returned clock.
	newRated := func(t *testing.T, store Store) (*GroupCommitter, *atomic.Int64) {
		g := NewGroupCommitter(store, GroupCommitOptions{RateWait: hour, RateBatchSize: four}, zaptest.NewLogger(t), nil)
		g.testSignals.queued = make(testSignal, 16)
		var clock atomic.Int64 // seconds past an epoch
		epoch := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
		g.testNow = func() time.Time { return epoch.Add(time.Duration(clock.Load()) * time.Second) }
		g.Start()
		t.Cleanup(g.Stop)
		return g, &clock
	}

	t.Run("AtASteadyRateABatchWaitsForItsSize", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		g, clock := newRated(t, store)
		require.NoError(t, g.Write(ctx, testWrite("first"))) // starts the measurement; no rate yet
		clock.Add(1)
		// Four writes a second from now on: a batch waits (up to an hour) for four.
		out := make(chan writeOutcome, 4)
		for i := range 4 {
			goWrite(ctx, g, fmt.Sprintf("w-%d", i), out)
		}
		for range 4 {
			require.NoError(t, (<-out).err)
		}
		require.Equal(t, []int{1, 4}, store.batchSizes(), "the four share one commit")
	})

	t.Run("AtALowRateNothingWaits", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		g, clock := newRated(t, store)
		require.NoError(t, g.Write(ctx, testWrite("first")))
		clock.Add(3600)
		// One write in an hour: the next two would not come within RateWait.
		done := make(chan error, 1)
		go func() { done <- g.Write(ctx, testWrite("lone")) }()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("a write at one an hour waited for company")
		}
		require.Equal(t, []int{1, 1}, store.batchSizes())
	})
}
