package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/shard"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/persistence"
)

// shardController owns the shards of this host: those that membership.AssignShards gives it
// among the live members. It reconciles whenever the membership changes (and every second, to
// retry what failed): it acquires the shards it gained by bumping their range_id, and hands
// off the shards it lost (stop, wait for the writes in flight, release). With one host it
// owns every shard. The routing client asks it (through ShardFor) and never assumes that.
type shardController struct {
	engine  *Engine
	monitor membership.Monitor
	// releaser records clean handoffs; nil on a backend without membership (one host).
	releaser persistence.MembershipStore

	mu     sync.RWMutex
	shards map[int32]*Shard
	// wantedSince is when a shard this host should own but does not yet was first seen so.
	wantedSince map[int32]time.Time
	subs        map[int]chan struct{}
	nextSub     int

	reconcileMu sync.Mutex
	stopOnce    sync.Once
	running     atomic.Bool
	stopCh      chan struct{}
	loopDone    chan struct{}
}

// handoffWaitDefault is how long a host waits for a live previous owner to release a shard
// before it takes the shard anyway (bumping the range_id fences the previous owner). The
// previous owner releases as soon as it sees the same membership, well within one heartbeat.
const handoffWaitDefault = time.Second

func newShardController(e *Engine, monitor membership.Monitor, releaser persistence.MembershipStore) *shardController {
	return &shardController{
		engine: e, monitor: monitor, releaser: releaser,
		shards: make(map[int32]*Shard), wantedSince: make(map[int32]time.Time), subs: make(map[int]chan struct{}),
		stopCh: make(chan struct{}), loopDone: make(chan struct{}),
	}
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
	if err := c.reconcile(ctx); err != nil {
		c.releaseAll(ctx, false)
		return err
	}
	e.logger.Info("history shards acquired", zap.Int32("num-shards", e.config.NumShards),
		zap.Int("owned", len(c.owned())), zap.String("host", c.selfID()))
	c.running.Store(true)
	go c.loop()
	return nil
}

func (c *shardController) selfID() string { return c.monitor.Self().ID }

// selfFence is a membership that can tell, on every call, whether this host may still serve
// its shards (StoreMonitor.Serving): it stops the moment its renewals are too old, before the
// controller's loop hands the shards off, which may wait on the same store that stopped
// answering.
type selfFence interface{ Serving() bool }

// serving reports whether this host may serve its shards now.
func (c *shardController) serving() bool {
	f, ok := c.monitor.(selfFence)
	return !ok || f.Serving()
}

// loop reconciles after every membership change, and periodically to retry failures and the
// handoffs it is waiting for.
func (c *shardController) loop() {
	defer close(c.loopDone)
	changes, unsubscribe := c.monitor.Subscribe()
	defer unsubscribe()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	lastFull := time.Now()
	for {
		select {
		case <-c.stopCh:
			return
		case <-changes:
		case <-ticker.C:
			c.mu.RLock()
			waiting := len(c.wantedSince) > 0
			c.mu.RUnlock()
			if !waiting && time.Since(lastFull) < time.Second {
				continue
			}
		}
		lastFull = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := c.reconcile(ctx); err != nil {
			c.engine.logger.Warn("shard reconcile failed; retrying", tag.Error(err))
		}
		cancel()
	}
}

// reconcile acquires the shards assigned to this host and hands off the others. An error
// means some acquisition failed; the rest was done.
func (c *shardController) reconcile(ctx context.Context) error {
	c.reconcileMu.Lock()
	defer c.reconcileMu.Unlock()
	self := c.selfID()
	members := c.monitor.Members()
	assignment := membership.AssignShards(c.engine.config.NumShards, members)
	alive := make(map[string]bool, len(members))
	for _, m := range members {
		alive[m.ID] = true
	}

	var release []*Shard
	var acquire []int32
	c.mu.Lock()
	for id := int32(1); id <= c.engine.config.NumShards; id++ {
		s, have := c.shards[id]
		want := assignment[id] == self
		switch {
		case have && !want:
			delete(c.shards, id)
			release = append(release, s)
		case want && !have:
			if _, ok := c.wantedSince[id]; !ok {
				c.wantedSince[id] = time.Now()
			}
			acquire = append(acquire, id)
		case !want:
			delete(c.wantedSince, id)
		}
	}
	c.mu.Unlock()

	if len(release) > 0 {
		if alive[self] {
			c.release(ctx, release, true)
			c.engine.logger.Info("handed shards off", zap.Int32s("shards", shardIDs(release)))
		} else {
			// This host's own membership lapsed: it could not renew its row for a TTL (paused,
			// starved, cut off from the store), so calls to its shards were stalling too and
			// another host may own them already. That is no handoff: recorded as released, the
			// shards' next owners would fire at once the leases of workers whose heartbeats
			// were stuck here; left unreleased, they apply the restart grace.
			c.release(ctx, release, false)
			metrics.ShardLosses.With(c.engine.scope).Inc(int64(len(release)))
			c.engine.logger.Warn("membership lapsed: stopped serving shards without handing them off",
				zap.Int32s("shards", shardIDs(release)))
		}
	}
	var errs []error
	var acquired []int32
	for _, id := range acquire {
		if !sameHosts(members, c.monitor.Members()) {
			break // the assignment is stale: the reconcile this change triggers does the rest
		}
		ok, err := c.acquire(ctx, id, alive)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			acquired = append(acquired, id)
		}
	}
	if len(acquired) > 0 {
		c.engine.logger.Info("acquired shards", zap.Int32s("shards", acquired))
	}
	if len(release) > 0 || len(acquired) > 0 {
		c.changed()
	}
	if c.releaser != nil {
		errs = append(errs, c.verify(ctx))
	}
	return errors.Join(errs...)
}

// verify drops the shards another host acquired since this one did. A write would find out
// too, but an idle shard makes none, and meanwhile its timers would wait on a host that can no
// longer write them.
func (c *shardController) verify(ctx context.Context) error {
	c.mu.RLock()
	held := make([]*Shard, 0, len(c.shards))
	for _, s := range c.shards {
		held = append(held, s)
	}
	c.mu.RUnlock()
	for _, s := range held {
		info, err := c.engine.store.GetShard(ctx, s.id)
		if err != nil {
			return fmt.Errorf("history: verify shard %d: %w", s.id, err)
		}
		if info.RangeID != s.rangeID {
			s.markLost(&persistence.ShardOwnershipLostError{ShardID: s.id, RangeID: s.rangeID, StoredRangeID: info.RangeID})
		}
	}
	return nil
}

// acquire takes shard id unless a live previous owner may still be handing it off.
func (c *shardController) acquire(ctx context.Context, id int32, alive map[string]bool) (bool, error) {
	e := c.engine
	self := c.selfID()
	c.mu.RLock()
	since := c.wantedSince[id]
	c.mu.RUnlock()
	if c.releaser != nil && time.Since(since) < handoffWaitDefault {
		info, err := e.store.GetShard(ctx, id)
		var notFound *persistence.NotFoundError
		switch {
		case errors.As(err, &notFound):
		case err != nil:
			return false, fmt.Errorf("history: read shard %d: %w", id, err)
		case info.Owner != self && alive[info.Owner] && !info.Released:
			return false, nil // its owner releases it once it sees the same membership
		}
	}
	info, err := e.store.AcquireShard(ctx, id, self)
	if err != nil {
		return false, fmt.Errorf("history: acquire shard %d: %w", id, err)
	}
	s := newShard(e, id, info.RangeID, info.Released)
	c.mu.Lock()
	if isClosed(c.stopCh) {
		c.mu.Unlock()
		return false, nil
	}
	c.shards[id] = s
	delete(c.wantedSince, id)
	owned := len(c.shards)
	c.mu.Unlock()
	s.start()
	metrics.ShardAcquisitions.With(e.scope).Inc(1)
	metrics.ShardHandoffLatency.With(e.scope).Record(time.Since(since))
	metrics.ShardsOwned.With(e.scope).Update(float64(owned))
	if !info.Released {
		s.logger.Debug("acquired a shard its previous owner did not release: restart grace applies")
	}
	return true, nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// release stops shards; graceful ones wait for their writes in flight and are recorded as
// released, so their next owner needs no restart grace.
func (c *shardController) release(ctx context.Context, shards []*Shard, graceful bool) {
	var wg sync.WaitGroup
	for _, s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.drain()
			if graceful && !s.lost.Load() {
				if err := s.flushUnwritten(ctx); err != nil {
					// The next owner starts from the last written state, as after a crash.
					s.logger.Warn("could not write the heartbeats answered from memory before the shard's release", tag.Error(err))
				}
			}
			s.stop()
			if !graceful || c.releaser == nil || s.lost.Load() {
				return
			}
			// While the grace of its own takeover still runs, the shard's leases may not all
			// have been renewable yet: the next owner must apply a grace too. The release then
			// leaves the shard ownerless rather than released, so the next owner still takes
			// it at once instead of waiting for a release that will not come.
			grace := dynamicconfig.LeaseExpiryGraceAfterRestart.Get(c.engine.dc)()
			needGrace := s.takenOver && time.Since(s.acquiredAt) < grace
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := c.releaser.ReleaseShard(rctx, s.id, s.rangeID, needGrace); err != nil {
				var lost *persistence.ShardOwnershipLostError
				if errors.As(err, &lost) {
					metrics.ShardLosses.With(c.engine.scope).Inc(1) // another host took it first
				}
				s.logger.Warn("could not record the shard's release; its next owner applies the restart grace", tag.Error(err))
				return
			}
			metrics.ShardReleases.With(c.engine.scope).Inc(1)
		}()
	}
	wg.Wait()
	c.mu.RLock()
	owned := len(c.shards)
	c.mu.RUnlock()
	metrics.ShardsOwned.With(c.engine.scope).Update(float64(owned))
}

// releaseAll stops every shard: handed off when graceful (a planned stop), left for the next
// owner to take over otherwise.
func (c *shardController) releaseAll(ctx context.Context, graceful bool) {
	c.mu.Lock()
	shards := make([]*Shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.shards = make(map[int32]*Shard)
	c.mu.Unlock()
	c.release(ctx, shards, graceful)
	if len(shards) > 0 {
		c.changed()
	}
}

// stop ends reconciliation and hands every shard off.
func (c *shardController) stop() {
	c.stopOnce.Do(func() { close(c.stopCh) })
	if c.running.Load() { // the loop runs only once start succeeded
		<-c.loopDone
	}
	c.reconcileMu.Lock()
	defer c.reconcileMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.releaseAll(ctx, true)
}

func (c *shardController) shardFor(namespaceID, businessID string) (*Shard, error) {
	id := shard.ForKey(namespaceID, businessID, c.engine.config.NumShards)
	return c.shard(id)
}

// ownedShard returns the shard of a business ID if this host holds it; nil otherwise.
func (c *shardController) ownedShard(namespaceID, businessID string) *Shard {
	id := shard.ForKey(namespaceID, businessID, c.engine.config.NumShards)
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.shards[id]
}

func (c *shardController) shard(id int32) (*Shard, error) {
	c.mu.RLock()
	s, ok := c.shards[id]
	c.mu.RUnlock()
	if !ok || !c.serving() {
		return nil, serviceerror.NewUnavailable(fmt.Sprintf("shard %d %s", id, notOwnedText))
	}
	return s, nil
}

// owned returns the shards served now, sorted.
func (c *shardController) owned() []int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]int32, 0, len(c.shards))
	for id := range c.shards {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (c *shardController) ownedShards() []*Shard {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*Shard, 0, len(c.shards))
	for _, s := range c.shards {
		out = append(out, s)
	}
	return out
}

func (c *shardController) subscribe() (<-chan struct{}, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.nextSub
	c.nextSub++
	ch := make(chan struct{}, 1)
	c.subs[id] = ch
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.subs, id)
	}
}

func (c *shardController) changed() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// shardLost stops serving a shard whose ownership moved elsewhere.
func (c *shardController) shardLost(s *Shard) {
	c.mu.Lock()
	if c.shards[s.id] == s {
		delete(c.shards, s.id)
	}
	owned := len(c.shards)
	c.mu.Unlock()
	s.drain()
	s.stop()
	metrics.ShardLosses.With(c.engine.scope).Inc(1)
	metrics.ShardsOwned.With(c.engine.scope).Update(float64(owned))
	c.engine.logger.Warn("stopped serving shard", tag.ShardID(s.id))
	c.changed()
}

func shardIDs(shards []*Shard) []int32 {
	out := make([]int32, len(shards))
	for i, s := range shards {
		out[i] = s.id
	}
	slices.Sort(out)
	return out
}

func newRunID() string { return uuid.NewString() }
