package history

import (
	"container/list"
	"context"
	"sync"
	"unique"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/memrelease"
)

// executionCacheSizeDefault bounds the business IDs a shard keeps loaded. Entries in use are
// never evicted, so the bound can be exceeded briefly under load.
const executionCacheSizeDefault = 50_000

// executionCacheDecodedDefault bounds the executions a shard keeps decoded. The others are
// kept encoded, as the store holds them (a few hundred bytes for an idle worker instead of a
// few kilobytes of protobuf messages), and decoded again by the next transaction that needs
// them: a fleet of 100,000 heartbeating workers touches each one only every few seconds,
// while a small hot set (a busy worker, an activity being polled) stays decoded.
const executionCacheDecodedDefault = 128

// cacheShrinkMin is the map size from which the entries map is rebuilt once it shrinks to a
// quarter of its peak: a Go map never gives back the buckets it grew for a burst.
const cacheShrinkMin = 256

type cacheKey struct {
	archetypeID uint32
	namespaceID string
	businessID  string
}

// cacheEntry is one business ID of one archetype. Its lock is the execution lock: every
// transaction on any run of the business ID holds it, which is what makes create-or-update
// atomic. The lock is a channel so that waiting for it honours the caller's deadline.
type cacheEntry struct {
	key cacheKey

	// Guarded by executionCache.mu.
	// lock exists while refs > 0: an idle entry of a large fleet does not carry one.
	lock chan struct{}
	// refs and waiters are 32-bit so that an entry, one per worker of a fleet, fits the
	// allocator's 96-byte class instead of 112 (TestCacheEntrySize).
	refs int32
	// waiters counts PollComponent calls waiting for the current run to change: the entry
	// (and its decoded execution, whose change signal they wait on) is kept while any wait.
	waiters int32
	// newer and older link the entry into the cache's recency order (recency).
	newer, older *cacheEntry
	// decodedElem is the entry's place in the decoded LRU (nil once encoded or never decoded).
	decodedElem *list.Element

	// Guarded by lock; read or changed by the cache only while refs == 0 (nobody holds or
	// waits for the lock), under executionCache.mu.
	current *loadedRun
	loaded  bool
}

// loadedRun is a run held in memory with the store version it was read or written at. While
// the run is idle and cold, exec is nil and the run is held in its persisted form instead
// (chasm.Execution.Persisted): state, entries, indexed and runID.
type loadedRun struct {
	exec      *chasm.Execution
	dbVersion int64
	// unwritten is set while the run holds deferred changes the store does not have
	// (chasm.Mutation.Deferred): its entry is not dropped until a write persists them.
	unwritten bool
	// held is set while a timer of the run may be held in the timer queue (Shard.holdTimers):
	// by the last committed mutation, or, for a run read from the store, by an earlier copy.
	held bool

	state   []byte
	entries []chasm.CollectionEntry
	indexed chasm.IndexedFields
	runID   string
}

// executionCache keeps recently used executions of one shard, least recently used evicted
// first. Of those, the maxDecoded most recently used are kept decoded, the others encoded.
// An entry whose business ID has no run (deleted, or never created) is dropped as soon as
// nobody uses it: there is nothing to keep, and a fleet that came and went leaves nothing
// behind.
type executionCache struct {
	maxSize    int
	maxDecoded int

	mu      sync.Mutex
	entries map[cacheKey]*cacheEntry
	lru     recency
	decoded *list.List
	peak    int
}

// recency orders a cache's entries from the most recently used (newest) to the least
// (oldest), linked through the entries themselves: a container/list element per entry would
// be one more allocation, 48 bytes, per cached worker of a large fleet.
type recency struct{ newest, oldest *cacheEntry }

func (r *recency) pushNewest(e *cacheEntry) {
	e.newer, e.older = nil, r.newest
	if r.newest != nil {
		r.newest.newer = e
	} else {
		r.oldest = e
	}
	r.newest = e
}

func (r *recency) remove(e *cacheEntry) {
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		r.newest = e.older
	}
	if e.older != nil {
		e.older.newer = e.newer
	} else {
		r.oldest = e.newer
	}
	e.newer, e.older = nil, nil
}

func (r *recency) touch(e *cacheEntry) {
	if r.newest != e {
		r.remove(e)
		r.pushNewest(e)
	}
}

func newExecutionCache(maxSize, maxDecoded int) *executionCache {
	if maxSize <= 0 {
		maxSize = executionCacheSizeDefault
	}
	if maxDecoded <= 0 {
		maxDecoded = executionCacheDecodedDefault
	}
	return &executionCache{
		maxSize: maxSize, maxDecoded: maxDecoded,
		entries: make(map[cacheKey]*cacheEntry), decoded: list.New(),
	}
}

// lock returns the entry for key with its execution lock held. The caller must call the
// returned release exactly once.
func (c *executionCache) lock(ctx context.Context, key cacheKey) (*cacheEntry, func(), error) {
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		e = &cacheEntry{key: key}
		c.lru.pushNewest(e)
		c.entries[key] = e
		c.peak = max(c.peak, len(c.entries))
	} else {
		c.lru.touch(e)
	}
	if e.lock == nil {
		e.lock = make(chan struct{}, 1)
	}
	lock := e.lock
	// Whoever takes the lock may decode the run: it joins the decoded LRU now, so that the
	// bound counts it once released.
	if e.decodedElem == nil {
		e.decodedElem = c.decoded.PushFront(e)
	} else {
		c.decoded.MoveToFront(e.decodedElem)
	}
	e.refs++
	c.mu.Unlock()

	select {
	case lock <- struct{}{}:
	case <-ctx.Done():
		c.unref(e)
		return nil, nil, ctx.Err()
	}
	return e, func() {
		<-lock
		c.unref(e)
	}, nil
}

// unwrittenState returns the encoded state of run runID of key if the cache holds it with
// deferred changes the store does not have yet; it waits for the execution lock if the entry is
// in use, as a transaction would.
func (c *executionCache) unwrittenState(ctx context.Context, key cacheKey, runID string) ([]byte, bool) {
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		c.mu.Unlock()
		return nil, false
	}
	if c.idle(e) {
		defer c.mu.Unlock()
		return e.unwrittenState(runID)
	}
	e.refs++
	lock := e.lock
	c.mu.Unlock()
	select {
	case lock <- struct{}{}:
	case <-ctx.Done():
		c.unref(e)
		return nil, false
	}
	defer func() {
		<-lock
		c.unref(e)
	}()
	return e.unwrittenState(runID)
}

// addWaiter and removeWaiter bracket a PollComponent wait on e's current run.
func (c *executionCache) addWaiter(e *cacheEntry) {
	c.mu.Lock()
	e.waiters++
	c.mu.Unlock()
}

func (c *executionCache) removeWaiter(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.waiters--
	c.boundLocked(e)
}

func (c *executionCache) idle(e *cacheEntry) bool { return e.refs == 0 && e.waiters == 0 }

// evictable reports whether an idle entry may be dropped: not while its run holds deferred
// changes that only memory has.
func (c *executionCache) evictable(e *cacheEntry) bool {
	return c.idle(e) && (e.current == nil || !e.current.unwritten)
}

func (c *executionCache) unref(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	if e.refs == 0 {
		e.lock = nil // nobody holds it or waits for it
	}
	c.boundLocked(e)
}

// boundLocked drops e if it is idle and holds no run, then brings the cache within its bounds:
// decoded runs beyond maxDecoded are encoded, entries beyond maxSize dropped, least recently
// used first, skipping those in use.
func (c *executionCache) boundLocked(e *cacheEntry) {
	if c.idle(e) && (!e.loaded || e.current == nil) {
		c.removeLocked(e)
	}
	for elem := c.decoded.Back(); elem != nil && c.decoded.Len() > c.maxDecoded; {
		victim := elem.Value.(*cacheEntry)
		elem = elem.Prev()
		if !c.idle(victim) {
			continue
		}
		c.decoded.Remove(victim.decodedElem)
		victim.decodedElem = nil
		if !victim.encode() && c.evictable(victim) {
			c.removeLocked(victim) // could not encode: forget it, the store has it
		}
	}
	for victim := c.lru.oldest; victim != nil && len(c.entries) > c.maxSize; {
		next := victim.newer
		if c.evictable(victim) {
			c.removeLocked(victim)
		}
		victim = next
	}
	var shrunk bool
	if c.entries, shrunk = memrelease.ShrinkMap(c.entries, &c.peak, cacheShrinkMin); shrunk {
		memrelease.Note()
	}
}

func (c *executionCache) removeLocked(e *cacheEntry) {
	if c.entries[e.key] != e {
		return
	}
	c.lru.remove(e)
	if e.decodedElem != nil {
		c.decoded.Remove(e.decodedElem)
		e.decodedElem = nil
	}
	delete(c.entries, e.key)
}

// encode replaces the entry's decoded run by its persisted form; false if it cannot.
func (e *cacheEntry) encode() bool {
	run := e.current
	if !e.loaded || run == nil || run.exec == nil {
		return true
	}
	state, entries, err := run.exec.Persisted()
	if err != nil {
		return false
	}
	run.state, run.entries, run.indexed, run.runID = state, entries, internIndexed(run.exec.Indexed()), run.exec.Key().RunID
	run.exec = nil
	return true
}

// unwrittenState is executionCache.unwrittenState for an entry the caller may read (its lock
// held, or idle under executionCache.mu).
func (e *cacheEntry) unwrittenState(runID string) ([]byte, bool) {
	run := e.current
	if !e.loaded || run == nil || !run.unwritten {
		return nil, false
	}
	if run.exec == nil {
		return run.state, run.runID == runID
	}
	if run.exec.Key().RunID != runID {
		return nil, false
	}
	state, err := run.exec.PersistedState()
	return state, err == nil
}

// internIndexed shares the strings of an idle run's indexed fields among the runs that have the
// same: a fleet's workers have a few task queues, and each cold entry otherwise kept its own
// copy of its queue's name (decoded from its last heartbeat), one more object per worker for
// the collector to mark. unique keeps a canonical copy while any handle lives; a copy made
// after the collector dropped one is as good, so none is kept here.
func internIndexed(f chasm.IndexedFields) chasm.IndexedFields {
	if f.Status != "" {
		f.Status = unique.Make(f.Status).Value()
	}
	if f.TaskQueue != "" {
		f.TaskQueue = unique.Make(f.TaskQueue).Value()
	}
	return f
}

// decode makes the entry's current run usable again (execution lock held); decoded says
// whether it had to, the run having been kept encoded.
func (e *cacheEntry) decode(registry *chasm.Registry, rc *chasm.RegistrableComponent) (decoded bool, err error) {
	run := e.current
	if run == nil || run.exec != nil {
		return false, nil
	}
	key := chasm.ExecutionKey{NamespaceID: e.key.namespaceID, BusinessID: e.key.businessID, RunID: run.runID}
	exec, err := chasm.LoadExecution(registry, rc, key, run.state, run.entries)
	if err != nil {
		return false, err
	}
	exec.SetStoredIndexed(run.indexed)
	run.exec, run.state, run.entries, run.indexed, run.runID = exec, nil, nil, chasm.IndexedFields{}, ""
	return true, nil
}

// len returns the number of entries, and of those not in use, how many hold a decoded run.
func (c *executionCache) len() (entries, decoded int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if c.idle(e) && e.loaded && e.current != nil && e.current.exec != nil {
			decoded++
		}
	}
	return len(c.entries), decoded
}

// maybeUnwritten returns the keys of the entries whose run may hold deferred changes: those
// that do, and those in use, which only their lock holder may look into.
func (c *executionCache) maybeUnwritten() []cacheKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []cacheKey
	for key, e := range c.entries {
		if !c.idle(e) || (e.loaded && e.current != nil && e.current.unwritten) {
			keys = append(keys, key)
		}
	}
	return keys
}

// clear drops every entry not in use; used when a shard closes.
func (c *executionCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if c.idle(e) {
			c.removeLocked(e)
		}
	}
}
