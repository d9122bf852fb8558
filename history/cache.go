package history

import (
	"container/list"
	"context"
	"sync"

	"github.com/vigilhq/vigil/chasm"
)

// executionCacheSizeDefault bounds the business IDs a shard keeps loaded. Entries in use are
// never evicted, so the bound can be exceeded briefly under load.
const executionCacheSizeDefault = 50_000

type cacheKey struct {
	archetypeID uint32
	namespaceID string
	businessID  string
}

// cacheEntry is one business ID of one archetype. Its lock is the execution lock: every
// transaction on any run of the business ID holds it, which is what makes create-or-update
// atomic. The lock is a channel so that waiting for it honours the caller's deadline.
type cacheEntry struct {
	key  cacheKey
	lock chan struct{}

	// Guarded by executionCache.mu.
	refs int
	elem *list.Element

	// Guarded by lock.
	loaded  bool
	current *loadedRun
}

// loadedRun is a run held in memory with the store version it was read or written at.
type loadedRun struct {
	exec      *chasm.Execution
	dbVersion int64
}

// executionCache keeps recently used executions of one shard, least recently used evicted
// first.
type executionCache struct {
	maxSize int

	mu      sync.Mutex
	entries map[cacheKey]*cacheEntry
	lru     *list.List
}

func newExecutionCache(maxSize int) *executionCache {
	if maxSize <= 0 {
		maxSize = executionCacheSizeDefault
	}
	return &executionCache{maxSize: maxSize, entries: make(map[cacheKey]*cacheEntry), lru: list.New()}
}

// lock returns the entry for key with its execution lock held. The caller must call the
// returned release exactly once.
func (c *executionCache) lock(ctx context.Context, key cacheKey) (*cacheEntry, func(), error) {
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		e = &cacheEntry{key: key, lock: make(chan struct{}, 1)}
		e.elem = c.lru.PushFront(e)
		c.entries[key] = e
	} else {
		c.lru.MoveToFront(e.elem)
	}
	e.refs++
	c.mu.Unlock()

	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		c.unref(e)
		return nil, nil, ctx.Err()
	}
	return e, func() {
		<-e.lock
		c.unref(e)
	}, nil
}

func (c *executionCache) unref(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	for elem := c.lru.Back(); elem != nil && len(c.entries) > c.maxSize; {
		victim := elem.Value.(*cacheEntry)
		elem = elem.Prev()
		if victim.refs > 0 {
			continue
		}
		c.lru.Remove(victim.elem)
		delete(c.entries, victim.key)
	}
}

// clear drops every entry not in use; used when a shard closes.
func (c *executionCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, e := range c.entries {
		if e.refs == 0 {
			c.lru.Remove(e.elem)
			delete(c.entries, key)
		}
	}
}
