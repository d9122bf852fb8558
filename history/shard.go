package history

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/visibility"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/tasks"
)

// Shard is one shard owned by this host: its executions, its task ID allocator and its two
// task queues. Every write it makes carries the range_id it acquired the shard with.
type Shard struct {
	engine  *Engine
	id      int32
	rangeID int64
	logger  *zap.Logger

	cache         *executionCache
	timerQueue    *tasks.TimerQueue
	outboundQueue *tasks.OutboundQueue

	idMu    sync.Mutex
	nextSeq int64
	// inflight holds task IDs handed to writes that have not finished. Outbound reads stop
	// below the smallest, so a reader never skips a task committed after a larger one.
	inflight map[int64]struct{}

	lost atomic.Bool
	// closing is set when the shard is being handed off; writeGate is held (shared) by every
	// write in flight, so drain can wait for them.
	closing   atomic.Bool
	writeGate sync.RWMutex
	drained   bool

	// acquiredAt and takenOver (acquired without a clean release: the restart grace applies)
	// decide whether a handoff may be recorded as clean: not while the grace still runs, or the
	// next owner would fire at once the leases the grace is holding.
	acquiredAt time.Time
	takenOver  bool

	// recoveredAt (Unix nanoseconds) is chasm.Context.RecoveredAt for every run of the shard:
	// the acquisition, or the last time a failed write dropped a run with deferred changes.
	recoveredAt atomic.Int64

	// stale holds, for runs loaded with collection rows outside the packed layout (written
	// by an older vigil), what the next collection change must rewrite (collections.go).
	// Empty once every such run has changed a collection.
	staleMu sync.Mutex
	stale   map[persistence.ExecutionKey]*staleRows
}

// Task IDs are rangeID<<taskSeqBits | seq: they grow across restarts (each start acquires a
// higher range_id) and never repeat within one.
const taskSeqBits = 32

// newShard returns a shard acquired with rangeID. released says its previous owner handed it
// off cleanly: then nothing it decided needs a restart grace.
func newShard(engine *Engine, id int32, rangeID int64, released bool) *Shard {
	s := &Shard{
		engine:   engine,
		id:       id,
		rangeID:  rangeID,
		logger:   engine.logger.With(tag.ShardID(id), tag.RangeID(rangeID)),
		cache:    newExecutionCache(engine.config.ExecutionCacheSize, engine.config.ExecutionCacheDecodedSize),
		nextSeq:  1,
		inflight: make(map[int64]struct{}),

		acquiredAt: time.Now(),
		takenOver:  !released,
	}
	s.recoveredAt.Store(engine.timeSource.Now().UnixNano())
	s.timerQueue = tasks.NewTimerQueue(id, engine.store, (*shardTimerExecutor)(s), engine.scheduler,
		engine.timeSource, engine.timerQueueOptions(rangeID, released), s.logger, engine.scope)
	s.outboundQueue = tasks.NewOutboundQueue(id, &ceilingTaskStore{TaskStore: engine.store, shard: s},
		(*shardOutboundExecutor)(s), engine.scheduler, engine.timeSource, engine.outboundQueueOptions(),
		s.logger, engine.scope)
	return s
}

// ID returns the shard's number.
func (s *Shard) ID() int32 { return s.id }

func (s *Shard) start() {
	s.timerQueue.Start()
	s.outboundQueue.Start()
}

// drain refuses new writes and waits for those in flight to finish, so that after it the
// store holds everything this owner acknowledged for the shard.
func (s *Shard) drain() {
	s.closing.Store(true)
	s.writeGate.Lock()
	s.drained = true // under the lock: every write that held the gate before has finished
	s.writeGate.Unlock()
}

// flushUnwritten writes, for a graceful release, the state of every run that holds changes
// only memory has (heartbeats answered from memory, worker.heartbeatWriteInterval). The next
// owner then starts from the last state this host acknowledged rather than the last it wrote:
// a watcher that relays both hosts sees each worker's heartbeats go on, not back, and no
// lease needs lease_bound to cover what was lost. It runs after drain, so that nothing else
// writes or answers from memory any more.
func (s *Shard) flushUnwritten(ctx context.Context) error {
	for _, key := range s.cache.maybeUnwritten() {
		if err := s.flushRun(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

func (s *Shard) flushRun(ctx context.Context, key cacheKey) error {
	entry, release, err := s.cache.lock(ctx, key)
	if err != nil {
		return err
	}
	defer release()
	run := entry.current
	if !entry.loaded || run == nil || !run.unwritten {
		return nil
	}
	rc, ok := s.engine.registry.ComponentByID(key.archetypeID)
	if !ok {
		return fmt.Errorf("no component of archetype %d", key.archetypeID)
	}
	if err := s.decode(entry, rc); err != nil {
		return err
	}
	// A transaction that changes nothing, unlike a deferred one, is written whole.
	m, err := run.exec.Update(s.engine.timeSource.Now(), func(chasm.MutableContext, chasm.Component) error { return nil })
	if err != nil {
		return err
	}
	return s.persist(ctx, entry, run, m, "")
}

func (s *Shard) stop() {
	s.timerQueue.Stop()
	s.outboundQueue.Stop()
	s.cache.clear()
}

// allocateTaskIDs reserves n task IDs and marks them in flight until release is called.
func (s *Shard) allocateTaskIDs(n int) ([]int64, func(), error) {
	if n == 0 {
		return nil, func() {}, nil
	}
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.nextSeq+int64(n) >= math.MaxUint32 {
		// Four billion tasks in one ownership of a shard; reacquiring would start a new range.
		return nil, nil, serviceerror.NewUnavailable(fmt.Sprintf("shard %d exhausted its task ID range", s.id))
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = s.rangeID<<taskSeqBits | s.nextSeq
		s.nextSeq++
		s.inflight[ids[i]] = struct{}{}
	}
	return ids, func() {
		s.idMu.Lock()
		defer s.idMu.Unlock()
		for _, id := range ids {
			delete(s.inflight, id)
		}
	}, nil
}

// outboundReadCeiling returns the largest task ID below which every allocated ID's write has
// finished (committed or failed).
func (s *Shard) outboundReadCeiling() int64 {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	ceiling := s.rangeID<<taskSeqBits | (s.nextSeq - 1)
	for id := range s.inflight {
		ceiling = min(ceiling, id-1)
	}
	return ceiling
}

// ceilingTaskStore hides outbound tasks above the shard's read ceiling from the outbound queue.
type ceilingTaskStore struct {
	persistence.TaskStore
	shard *Shard
}

func (c *ceilingTaskStore) GetOutboundTasks(ctx context.Context, shardID int32, afterTaskID int64, pageSize int) ([]*persistence.OutboundTask, error) {
	ceiling := c.shard.outboundReadCeiling()
	if afterTaskID >= ceiling {
		return nil, nil
	}
	page, err := c.TaskStore.GetOutboundTasks(ctx, shardID, afterTaskID, pageSize)
	if err != nil {
		return nil, err
	}
	for i, t := range page {
		if t.TaskID > ceiling {
			return page[:i], nil
		}
	}
	return page, nil
}

// decode makes entry's run usable again (entry.decode), counting a decode of an encoded run.
func (s *Shard) decode(entry *cacheEntry, rc *chasm.RegistrableComponent) error {
	decoded, err := entry.decode(s.engine.registry, rc)
	if decoded {
		s.engine.decodes.Inc(1)
	}
	return err
}

// lockEntry returns the cache entry of key's business ID, locked, with its current run loaded.
func (s *Shard) lockEntry(ctx context.Context, rc *chasm.RegistrableComponent, key chasm.ExecutionKey) (*cacheEntry, func(), error) {
	if s.lost.Load() || s.closing.Load() || !s.engine.controller.serving() {
		return nil, nil, s.lostError()
	}
	entry, release, err := s.cache.lock(ctx, cacheKey{archetypeID: rc.ID(), namespaceID: key.NamespaceID, businessID: key.BusinessID})
	if err != nil {
		return nil, nil, err
	}
	if entry.loaded {
		if err := s.decode(entry, rc); err != nil {
			// Encoded by this process from a state it had decoded: not expected. The store
			// has the run; read it again.
			s.logger.Error("cached execution does not decode; reloading it", tag.BusinessID(key.BusinessID), tag.Error(err))
			s.forget(entry)
		}
	}
	if !entry.loaded {
		if err := s.loadCurrent(ctx, entry, rc, key); err != nil {
			release()
			return nil, nil, err
		}
	}
	if entry.current != nil {
		entry.current.exec.SetRecoveredAt(s.recovered())
	}
	return entry, release, nil
}

func (s *Shard) loadCurrent(ctx context.Context, entry *cacheEntry, rc *chasm.RegistrableComponent, key chasm.ExecutionKey) error {
	current, err := s.engine.store.GetCurrentExecution(ctx, s.id, persistence.CurrentExecutionKey{
		NamespaceID: key.NamespaceID, ArchetypeID: rc.ID(), BusinessID: key.BusinessID,
	})
	var notFound *persistence.NotFoundError
	switch {
	case errors.As(err, &notFound):
		entry.current, entry.loaded = nil, true
		return nil
	case err != nil:
		return s.storeError("GetCurrentExecution", err)
	}
	key.RunID = current.RunID
	run, err := s.loadRun(ctx, rc, key)
	if err != nil {
		return err
	}
	entry.current, entry.loaded = run, true
	return nil
}

// loadRun reads one run from the store; nil if it does not exist.
func (s *Shard) loadRun(ctx context.Context, rc *chasm.RegistrableComponent, key chasm.ExecutionKey) (*loadedRun, error) {
	record, err := s.engine.store.GetExecution(ctx, s.id, persistenceKey(rc, key))
	var notFound *persistence.NotFoundError
	switch {
	case errors.As(err, &notFound):
		return nil, nil
	case err != nil:
		return nil, s.storeError("GetExecution", err)
	}
	entries, stale, err := unpackCollections(record.Collections)
	if err == nil {
		s.setStale(persistenceKey(rc, key), stale)
	}
	var exec *chasm.Execution
	if err == nil {
		exec, err = chasm.LoadExecution(s.engine.registry, rc, key, record.State, entries)
	}
	if err != nil {
		metrics.CorruptExecutions.With(s.engine.scope).Inc(1)
		s.logger.Error("corrupt execution", tag.Archetype(rc.FullName()), tag.NamespaceID(key.NamespaceID),
			tag.BusinessID(key.BusinessID), tag.RunID(key.RunID), tag.Error(err))
		return nil, serviceerror.NewDataLoss(err.Error())
	}
	exec.SetStoredIndexed(chasm.IndexedFields{Status: record.Indexed.Status, TaskQueue: record.Indexed.TaskQueue})
	exec.SetRecoveredAt(s.recovered())
	// held: a copy of the run this host dropped may have left a timer held.
	return &loadedRun{exec: exec, dbVersion: record.DBVersion, held: true}, nil
}

// runFor returns the run key addresses within a locked entry: the current run for an empty
// RunID, otherwise that run (read from the store if it is not the current one). nil if none.
func (s *Shard) runFor(ctx context.Context, entry *cacheEntry, rc *chasm.RegistrableComponent, key chasm.ExecutionKey) (*loadedRun, error) {
	if key.RunID == "" || (entry.current != nil && entry.current.exec.Key().RunID == key.RunID) {
		return entry.current, nil
	}
	return s.loadRun(ctx, rc, key)
}

// write persists a mutation of run and, once durable, applies it. Any failure leaves the
// entry to be reloaded: after an error the outcome of a write may be unknown (a timeout after
// the batch was taken), and only the store knows.
func (s *Shard) write(
	ctx context.Context, entry *cacheEntry, run *loadedRun, m *chasm.Mutation, expectedCurrentRunID string,
) error {
	s.writeGate.RLock()
	defer s.writeGate.RUnlock()
	// Self-fenced (its membership renewals are too old), the host sends nothing more: another
	// host may take the shard as soon as its row expires.
	if s.lost.Load() || s.closing.Load() || !s.engine.controller.serving() {
		s.forget(entry)
		return s.lostError()
	}
	exec := run.exec
	if m.Deferred && entry != nil {
		// A change of the state alone that the component let wait: applied in memory, written
		// with the run's next write. The entry stays cached until then (unwritten).
		exec.Apply(m)
		run.unwritten = true
		s.holdTimers(run, m)
		return nil
	}
	return s.persist(ctx, entry, run, m, expectedCurrentRunID)
}

// persist writes a mutation of run and, once durable, applies it (write, past its checks).
func (s *Shard) persist(
	ctx context.Context, entry *cacheEntry, run *loadedRun, m *chasm.Mutation, expectedCurrentRunID string,
) error {
	exec := run.exec
	rc := exec.Archetype()
	w := &persistence.ExecutionWrite{
		ShardID:              s.id,
		RangeID:              s.rangeID,
		Mode:                 persistence.WriteModeUpdate,
		Key:                  persistenceKey(rc, exec.Key()),
		ExpectedCurrentRunID: expectedCurrentRunID,
		PrevDBVersion:        run.dbVersion,
		NextDBVersion:        run.dbVersion + 1,
		State:                m.State,
		Lifecycle:            persistenceLifecycle(m.Lifecycle),
		Indexed:              persistence.IndexedFields{Status: m.Indexed.Status, TaskQueue: m.Indexed.TaskQueue},
	}
	switch {
	case m.Deleted:
		// The store removes the run with its collections and tasks, and the current row if
		// it names this run.
		w.Mode = persistence.WriteModeDelete
		w.NextDBVersion, w.State = 0, nil
	case m.Created:
		w.Mode = persistence.WriteModeCreate
	default:
		prev := exec.Indexed()
		w.PrevIndexed = &persistence.IndexedFields{Status: prev.Status, TaskQueue: prev.TaskQueue}
		prevLifecycle := persistenceLifecycle(exec.Lifecycle())
		w.PrevLifecycle = &prevLifecycle
	}
	// The visibility record goes with the state only when it changed: most writes (an
	// activity's heartbeat) leave it as it was.
	if m.Visibility != nil && !m.Deleted {
		if m.Created {
			w.Visibility = m.Visibility
		} else if prev := exec.Visibility(); !prev.Equal(m.Visibility) {
			w.Visibility = m.Visibility
			w.KeepVisibilityAttributes = prev != nil && visibility.AttributesEqual(prev.Attributes, m.Visibility.Attributes)
		}
	}
	// Collections are stored packed in buckets: only the buckets the change touches are
	// rewritten, and rows an older vigil wrote are converted in the same transaction.
	var stale *staleRows
	if !m.Deleted && len(m.CollectionPuts)+len(m.CollectionDeletes) > 0 {
		if !m.Created {
			stale = s.staleFor(w.Key)
		}
		w.CollectionPuts, w.CollectionDeletes = packCollectionChanges(exec, m, stale)
	}

	ids, release, err := s.allocateTaskIDs(len(m.Tasks))
	if err != nil {
		return err
	}
	defer release()
	now := s.engine.timeSource.Now()
	for i, task := range m.Tasks {
		payload, err := task.MarshalPayload()
		if err != nil {
			return serviceerror.NewInternal(fmt.Sprintf("encode %s task of %s: %v", task.Type.FullName(), exec.Key(), err))
		}
		if task.Attributes.IsTimer() {
			w.TimerTasks = append(w.TimerTasks, &persistence.TimerTask{
				ShardID:        s.id,
				TaskID:         ids[i],
				VisibilityTime: task.Attributes.ScheduledTime.UTC(),
				Execution:      w.Key,
				TaskTypeID:     task.Type.ID(),
				Singleton:      task.Type.IsSingletonTimer(),
				Payload:        payload,
			})
		} else {
			w.OutboundTasks = append(w.OutboundTasks, &persistence.OutboundTask{
				ShardID:     s.id,
				TaskID:      ids[i],
				Destination: task.Attributes.Destination,
				Execution:   w.Key,
				TaskTypeID:  task.Type.ID(),
				Payload:     payload,
				CreatedTime: now.UTC(),
			})
		}
	}

	if err := s.engine.committer.Write(ctx, w); err != nil {
		s.forget(entry)
		exec.WakePollers() // its pollers would otherwise wait on a dropped execution
		return s.storeError("WriteExecution", err)
	}
	exec.Apply(m)
	run.dbVersion = w.NextDBVersion
	run.unwritten = false
	release()
	if stale != nil || m.Deleted {
		s.setStale(w.Key, nil)
	}
	if m.Deleted {
		if entry != nil {
			entry.current = nil // entry is only given for the current run, now gone
		}
		return nil
	}
	if len(w.TimerTasks) > 0 {
		s.timerQueue.NotifyNewTimers(w.TimerTasks)
	}
	if len(w.OutboundTasks) > 0 {
		s.outboundQueue.NotifyNewTasks()
	}
	s.holdTimers(run, m)
	return nil
}

// holdTimers gives the timer queue the holds a committed mutation of run asks for
// (chasm.MutableContext.PostponeTimer) and releases those of earlier mutations that it does
// not restate: a hold lasts until the run's next committed change.
func (s *Shard) holdTimers(run *loadedRun, m *chasm.Mutation) {
	if len(m.Postponed) == 0 && !run.held {
		return
	}
	exec := run.exec
	rc := exec.Archetype()
	key := persistenceKey(rc, exec.Key())
	for _, timer := range rc.SingletonTimers() {
		var until time.Time
		for _, p := range m.Postponed {
			if p.Type == timer {
				until = p.Until
			}
		}
		s.timerQueue.Hold(key, timer.ID(), until)
	}
	run.held = len(m.Postponed) > 0
}

// forget drops the entry's run from memory, to be read from the store again; nil does nothing.
func (s *Shard) forget(entry *cacheEntry) {
	if entry == nil {
		return
	}
	if run := entry.current; run != nil && run.unwritten {
		// Its deferred changes are dropped unwritten: RecoveredAt moves, since any run of the
		// shard loaded from now on may lack them.
		s.recoveredAt.Store(s.engine.timeSource.Now().UnixNano())
	}
	entry.loaded, entry.current = false, nil
}

// recovered is chasm.Context.RecoveredAt for the shard's runs.
func (s *Shard) recovered() time.Time { return time.Unix(0, s.recoveredAt.Load()) }

// staleFor returns what the store holds of run key outside the packed layout; nil if nothing.
func (s *Shard) staleFor(key persistence.ExecutionKey) *staleRows {
	s.staleMu.Lock()
	defer s.staleMu.Unlock()
	return s.stale[key]
}

// setStale records what a run's store rows hold outside the packed layout (nil: nothing).
func (s *Shard) setStale(key persistence.ExecutionKey, stale *staleRows) {
	s.staleMu.Lock()
	defer s.staleMu.Unlock()
	switch {
	case stale != nil:
		if s.stale == nil {
			s.stale = make(map[persistence.ExecutionKey]*staleRows)
		}
		s.stale[key] = stale
	case s.stale != nil:
		delete(s.stale, key)
		if len(s.stale) == 0 {
			s.stale = nil // the map of an upgrade's burst is not kept
		}
	}
}

// storeError turns a store error into what a client can act on. Conflicts and lost ownership
// are Unavailable: the client retries and reaches the current owner with fresh state.
func (s *Shard) storeError(op string, err error) error {
	var (
		lost     *persistence.ShardOwnershipLostError
		cond     *persistence.ConditionFailedError
		exists   *persistence.ExecutionAlreadyExistsError
		conflict *persistence.CurrentExecutionConflictError
	)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &lost):
		s.markLost(err)
		return s.lostError()
	case errors.As(err, &cond), errors.As(err, &exists), errors.As(err, &conflict):
		return serviceerror.NewUnavailable(fmt.Sprintf("shard %d: %s: concurrent change, retry: %v", s.id, op, err))
	}
	metrics.PersistenceErrors.With(s.engine.scope, metrics.OperationTag(op)).Inc(1)
	s.logger.Warn("persistence error", zap.String("operation", op), tag.Error(err))
	return serviceerror.NewUnavailable(fmt.Sprintf("shard %d: %s: %v", s.id, op, err))
}

func (s *Shard) markLost(err error) {
	if s.lost.CompareAndSwap(false, true) {
		s.logger.Error("shard ownership lost; this host stops serving it", tag.Error(err))
		go s.engine.controller.shardLost(s)
	}
}

func (s *Shard) lostError() error {
	return serviceerror.NewUnavailable(fmt.Sprintf("shard %d %s", s.id, notOwnedText))
}

func persistenceKey(rc *chasm.RegistrableComponent, key chasm.ExecutionKey) persistence.ExecutionKey {
	return persistence.ExecutionKey{
		NamespaceID: key.NamespaceID,
		ArchetypeID: rc.ID(),
		BusinessID:  key.BusinessID,
		RunID:       key.RunID,
	}
}

func persistenceLifecycle(l chasm.LifecycleState) persistence.Lifecycle {
	switch l {
	case chasm.LifecycleCompleted:
		return persistence.LifecycleCompleted
	case chasm.LifecycleFailed:
		return persistence.LifecycleFailed
	}
	return persistence.LifecycleRunning
}
