package history

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/shard"
)

// shardController owns the shards of this host. With one host it acquires all of them; the
// routing client asks it (through ShardFor) and never assumes that.
type shardController struct {
	engine *Engine

	mu     sync.RWMutex
	shards map[int32]*Shard
}

func newShardController(e *Engine) *shardController {
	return &shardController{engine: e, shards: make(map[int32]*Shard)}
}

func (c *shardController) start(ctx context.Context) error {
	e := c.engine
	stored, err := e.store.InitClusterMetadata(ctx, e.config.NumShards)
	if err != nil {
		return fmt.Errorf("history: read cluster metadata: %w", err)
	}
	if stored != e.config.NumShards {
		return fmt.Errorf("history: this cluster was created with %d shards and cannot start with %d: "+
			"set numShards to %d (the shard of every execution depends on it)", stored, e.config.NumShards, stored)
	}
	for id := int32(1); id <= e.config.NumShards; id++ {
		info, err := e.store.AcquireShard(ctx, id, e.config.HostID)
		if err != nil {
			c.stop()
			return fmt.Errorf("history: acquire shard %d: %w", id, err)
		}
		s := newShard(e, id, info.RangeID)
		c.mu.Lock()
		c.shards[id] = s
		c.mu.Unlock()
		s.start()
	}
	e.logger.Info("history shards acquired", zap.Int32("num-shards", e.config.NumShards), zap.String("host", e.config.HostID))
	return nil
}

func (c *shardController) stop() {
	c.mu.Lock()
	shards := c.shards
	c.shards = make(map[int32]*Shard)
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.stop()
		}()
	}
	wg.Wait()
}

func (c *shardController) shardFor(namespaceID, businessID string) (*Shard, error) {
	id := shard.ForKey(namespaceID, businessID, c.engine.config.NumShards)
	return c.shard(id)
}

func (c *shardController) shard(id int32) (*Shard, error) {
	c.mu.RLock()
	s, ok := c.shards[id]
	c.mu.RUnlock()
	if !ok {
		return nil, serviceerror.NewUnavailable(fmt.Sprintf("shard %d is not owned by this host", id))
	}
	return s, nil
}

// shardLost stops serving a shard whose ownership moved elsewhere.
func (c *shardController) shardLost(s *Shard) {
	c.mu.Lock()
	if c.shards[s.id] == s {
		delete(c.shards, s.id)
	}
	c.mu.Unlock()
	s.stop()
	c.engine.logger.Warn("stopped serving shard", tag.ShardID(s.id))
}

func newRunID() string { return uuid.NewString() }
