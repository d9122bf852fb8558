// Package history runs CHASM executions durably. It owns shards, implements chasm.Engine over
// the store (execution cache, one lock per business ID, create-or-update, state and tasks in
// one group-committed write), drives each shard's timer and outbound queues, and serves the
// history gRPC API that component libraries register on it.
package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/visibility"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/tasks"
)

// Engine is the durable chasm.Engine.
type Engine struct {
	config     Config
	registry   *chasm.Registry
	store      persistence.Store
	committer  *persistence.GroupCommitter
	scheduler  *tasks.Scheduler
	timeSource clock.TimeSource
	dc         *dynamicconfig.Collection
	logger     *zap.Logger
	scope      tally.Scope
	yield      func(ctx context.Context)
	// decodes counts the cache's decodes (metrics.ExecutionCacheDecodes), one per miss.
	decodes tally.Counter

	controller *shardController
}

var _ chasm.Engine = (*Engine)(nil)

// EngineParams are the engine's dependencies.
type EngineParams struct {
	Config        Config
	Registry      *chasm.Registry
	Store         persistence.Store
	Committer     *persistence.GroupCommitter
	Scheduler     *tasks.Scheduler
	TimeSource    clock.TimeSource
	DynamicConfig *dynamicconfig.Collection
	Logger        *zap.Logger
	MetricsScope  tally.Scope
	// Membership says which hosts are alive; nil means this host alone (Config.HostID), which
	// owns every shard.
	Membership membership.Monitor
	// YieldToCalls, when set, holds the outbound queues' next deliveries while the host is
	// behind on its calls (Admission.YieldToCalls); see tasks.OutboundQueueOptions.Yield.
	YieldToCalls func(ctx context.Context)
}

// NewEngine returns an engine that serves nothing until Start acquires its shards.
func NewEngine(p EngineParams) (*Engine, error) {
	cfg, err := p.Config.withDefaults()
	if err != nil {
		return nil, err
	}
	if p.TimeSource == nil {
		p.TimeSource = clock.NewRealTimeSource()
	}
	if p.DynamicConfig == nil {
		p.DynamicConfig = dynamicconfig.NewNoopCollection()
	}
	if p.MetricsScope == nil {
		p.MetricsScope = tally.NoopScope
	}
	e := &Engine{
		config:     cfg,
		registry:   p.Registry,
		store:      p.Store,
		committer:  p.Committer,
		scheduler:  p.Scheduler,
		timeSource: p.TimeSource,
		dc:         p.DynamicConfig,
		logger:     p.Logger.With(zap.String("service", "history")),
		scope:      p.MetricsScope.SubScope("history"),
		yield:      p.YieldToCalls,
	}
	e.decodes = metrics.ExecutionCacheDecodes.With(e.scope)
	if p.Membership == nil {
		p.Membership = membership.NewStatic(membership.Host{ID: cfg.HostID})
	}
	releaser, _ := p.Store.(persistence.MembershipStore)
	if _, static := p.Membership.(*membership.Static); static {
		releaser = nil // one host for good: nobody to hand a shard to
	}
	e.controller = newShardController(e, p.Membership, releaser)
	return e, nil
}

// Start gives executions written before the store kept visibility records theirs
// (BackfillVisibility), checks the shard count against the store and acquires the shards the
// membership assigns to this host; from then on it follows the membership's changes.
func (e *Engine) Start(ctx context.Context) error {
	if err := e.BackfillVisibility(ctx); err != nil {
		return err
	}
	return e.controller.start(ctx)
}

// Stop hands every shard off: it refuses new calls (Unavailable), waits for the writes in
// flight, stops the shard's queues and records the release.
func (e *Engine) Stop() { e.controller.stop() }

// Abandon stops serving every shard without handing any off, as a crash would: the next
// owners take them over with the restart grace. Tests use it to play a host's death.
func (e *Engine) Abandon() {
	e.controller.stopOnce.Do(func() { close(e.controller.stopCh) })
	if e.controller.running.Load() {
		<-e.controller.loopDone
	}
	e.controller.releaseAll(context.Background(), false)
}

// Ready says whether this host serves what it should: it counts itself a live member (its
// membership renewals succeed) and owns every shard the membership assigns to it.
func (e *Engine) Ready() error {
	m := e.controller.monitor
	self := m.Self().ID
	members := m.Members()
	if !slices.ContainsFunc(members, func(h membership.Host) bool { return h.ID == self }) {
		return fmt.Errorf("host %s is not a live cluster member (membership not renewed)", self)
	}
	assigned := 0
	for _, owner := range membership.AssignShards(e.config.NumShards, members) {
		if owner == self {
			assigned++
		}
	}
	if owned := len(e.controller.owned()); owned < assigned {
		return fmt.Errorf("host %s serves %d of its %d shards", self, owned, assigned)
	}
	return nil
}

// MemoryStats counts what this host holds in memory for its executions, over its shards.
type MemoryStats struct {
	// CachedExecutions is the business IDs in the execution caches; DecodedExecutions, of those
	// not in use, how many are held decoded (the others are held in their persisted form).
	CachedExecutions, DecodedExecutions int
	// TimerTasks is the timer tasks in memory (pending, retrying or executing); SingletonTimers
	// the singleton timers the queues track.
	TimerTasks, SingletonTimers int
}

// MemoryStats returns the counts of what the owned shards hold in memory.
func (e *Engine) MemoryStats() MemoryStats {
	var st MemoryStats
	for _, s := range e.controller.ownedShards() {
		n, d := s.cache.len()
		t, sg := s.timerQueue.InMemory()
		st.CachedExecutions += n
		st.DecodedExecutions += d
		st.TimerTasks += t
		st.SingletonTimers += sg
	}
	return st
}

// OwnedShards returns the shards this host serves now, sorted.
func (e *Engine) OwnedShards() []int32 { return e.controller.owned() }

// SubscribeShards returns a channel that receives after every change of OwnedShards (sends
// are coalesced and never block) and a function that ends the subscription.
func (e *Engine) SubscribeShards() (<-chan struct{}, func()) { return e.controller.subscribe() }

// Membership returns the monitor the engine follows.
func (e *Engine) Membership() membership.Monitor { return e.controller.monitor }

// NumShards returns the cluster's shard count.
func (e *Engine) NumShards() int32 { return e.config.NumShards }

// Registry implements chasm.Engine.
func (e *Engine) Registry() *chasm.Registry { return e.registry }

// TimeSource returns the engine's clock.
func (e *Engine) TimeSource() clock.TimeSource { return e.timeSource }

func (e *Engine) timerQueueOptions(rangeID int64, released bool) tasks.TimerQueueOptions {
	grace := dynamicconfig.LeaseExpiryGraceAfterRestart.Get(e.dc)
	return tasks.TimerQueueOptions{
		LookAhead: dynamicconfig.TimerLookAheadDuration.Get(e.dc),
		PageSize:  dynamicconfig.TimerLookAheadPageSize.Get(e.dc),
		// The grace is for what was decided before this host owned the shard (a lease granted
		// before an outage, whose holder could not heartbeat through it). A task written since
		// carries this ownership's range in its ID and fires on time.
		GracePeriod: func(task *persistence.TimerTask) time.Duration {
			// A shard its previous owner released cleanly had no outage: its leases were
			// renewable all along.
			if released || task.TaskID>>taskSeqBits >= rangeID {
				return 0
			}
			if t, ok := e.registry.TaskByID(task.TaskTypeID); ok && t.HasRestartGrace() {
				return grace()
			}
			return 0
		},
	}
}

func (e *Engine) outboundQueueOptions() tasks.OutboundQueueOptions {
	return tasks.OutboundQueueOptions{
		RetryInitialInterval: dynamicconfig.OutboundRetryInitialInterval.Get(e.dc),
		RetryMaxInterval:     dynamicconfig.OutboundRetryMaxInterval.Get(e.dc),
		AlertAttempts:        dynamicconfig.OutboundMaxAttemptsBeforeAlert.Get(e.dc),
		Yield:                e.yield,
		Yields: func(task *persistence.OutboundTask) bool {
			t, ok := e.registry.TaskByID(task.TaskTypeID)
			return ok && t.YieldsToCalls()
		},
	}
}

func (e *Engine) resolve(ref chasm.ComponentRef) (*chasm.RegistrableComponent, *Shard, error) {
	rc, ok := e.registry.Component(ref.Archetype)
	if !ok {
		return nil, nil, serviceerror.NewInvalidArgument(fmt.Sprintf("unknown archetype %q", ref.Archetype))
	}
	if ref.Key.NamespaceID == "" || ref.Key.BusinessID == "" {
		return nil, nil, serviceerror.NewInvalidArgument(fmt.Sprintf("incomplete execution key %s", ref.Key))
	}
	shard, err := e.controller.shardFor(ref.Key.NamespaceID, ref.Key.BusinessID)
	if err != nil {
		return nil, nil, err
	}
	return rc, shard, nil
}

// StartExecution implements chasm.Engine.
func (e *Engine) StartExecution(
	ctx context.Context, ref chasm.ComponentRef, newFn func(chasm.MutableContext) (chasm.Component, error), opts chasm.StartOptions,
) (chasm.StartResult, error) {
	rc, shard, err := e.resolve(ref)
	if err != nil {
		return chasm.StartResult{}, err
	}
	entry, release, err := shard.lockEntry(ctx, rc, ref.Key)
	if err != nil {
		return chasm.StartResult{}, err
	}
	defer release()

	var currentRunID string
	var lifecycle chasm.LifecycleState
	if entry.current != nil {
		currentRunID, lifecycle = entry.current.exec.Key().RunID, entry.current.exec.Lifecycle()
	}
	existing, err := chasm.CheckStart(ref, opts, currentRunID, lifecycle)
	if err != nil {
		return chasm.StartResult{}, err
	}
	if existing != "" {
		return chasm.StartResult{RunID: existing}, nil
	}
	return e.create(ctx, shard, entry, rc, ref.Key, newFn, nil)
}

// UpdateWithStart implements chasm.Engine.
func (e *Engine) UpdateWithStart(
	ctx context.Context, ref chasm.ComponentRef,
	newFn func(chasm.MutableContext) (chasm.Component, error), updateFn func(chasm.MutableContext, chasm.Component) error,
) (chasm.StartResult, error) {
	rc, shard, err := e.resolve(ref)
	if err != nil {
		return chasm.StartResult{}, err
	}
	entry, release, err := shard.lockEntry(ctx, rc, ref.Key)
	if err != nil {
		return chasm.StartResult{}, err
	}
	defer release()

	if entry.current == nil {
		return e.create(ctx, shard, entry, rc, ref.Key, newFn, updateFn)
	}
	run := entry.current
	m, err := run.exec.Update(e.timeSource.Now(), updateFn)
	if err != nil {
		return chasm.StartResult{}, err
	}
	if err := shard.write(ctx, entry, run, m, ""); err != nil {
		return chasm.StartResult{}, err
	}
	return chasm.StartResult{RunID: run.exec.Key().RunID}, nil
}

func (e *Engine) create(
	ctx context.Context, shard *Shard, entry *cacheEntry, rc *chasm.RegistrableComponent, key chasm.ExecutionKey,
	newFn func(chasm.MutableContext) (chasm.Component, error), then func(chasm.MutableContext, chasm.Component) error,
) (chasm.StartResult, error) {
	var expectedCurrent string
	if entry.current != nil {
		expectedCurrent = entry.current.exec.Key().RunID
	}
	key.RunID = newRunID()
	exec := chasm.NewExecution(e.registry, rc, key)
	m, err := exec.Start(e.timeSource.Now(), newFn, then)
	if err != nil {
		return chasm.StartResult{}, err
	}
	run := &loadedRun{exec: exec}
	if err := shard.write(ctx, entry, run, m, expectedCurrent); err != nil {
		return chasm.StartResult{}, err
	}
	entry.current = run
	return chasm.StartResult{RunID: key.RunID, Created: true}, nil
}

// lockedRun is the run a ref addresses, with its business ID's lock held until release.
type lockedRun struct {
	shard   *Shard
	entry   *cacheEntry // nil when the run is not the cached current one
	run     *loadedRun
	release func()
}

// lockRun resolves ref, takes its execution lock and loads the run it addresses; a missing
// run is NotFound (and the lock is released).
func (e *Engine) lockRun(ctx context.Context, ref chasm.ComponentRef) (*lockedRun, error) {
	rc, shard, err := e.resolve(ref)
	if err != nil {
		return nil, err
	}
	entry, release, err := shard.lockEntry(ctx, rc, ref.Key)
	if err != nil {
		return nil, err
	}
	run, err := shard.runFor(ctx, entry, rc, ref.Key)
	if err == nil && run == nil {
		err = chasm.NewExecutionNotFoundError(ref)
	}
	if err != nil {
		release()
		return nil, err
	}
	if entry.current != run {
		entry = nil // a non-current run is not cached
	}
	return &lockedRun{shard: shard, entry: entry, run: run, release: release}, nil
}

// UpdateComponent implements chasm.Engine.
func (e *Engine) UpdateComponent(
	ctx context.Context, ref chasm.ComponentRef, updateFn func(chasm.MutableContext, chasm.Component) error,
) error {
	l, err := e.lockRun(ctx, ref)
	if err != nil {
		return err
	}
	defer l.release()
	m, err := l.run.exec.Update(e.timeSource.Now(), updateFn)
	if err != nil {
		return err
	}
	return l.shard.write(ctx, l.entry, l.run, m, "")
}

// ReadComponent implements chasm.Engine.
func (e *Engine) ReadComponent(
	ctx context.Context, ref chasm.ComponentRef, readFn func(chasm.Context, chasm.Component) error,
) error {
	l, err := e.lockRun(ctx, ref)
	if err != nil {
		return err
	}
	defer l.release()
	return l.run.exec.Read(e.timeSource.Now(), readFn)
}

// PollComponent implements chasm.Engine. It waits on the cached execution's change signal, so
// a poll of a non-current run (which is not cached) only sees its state at each re-check.
func (e *Engine) PollComponent(
	ctx context.Context, ref chasm.ComponentRef, predicate func(chasm.Context, chasm.Component) (bool, error),
) error {
	for {
		l, err := e.lockRun(ctx, ref)
		if err != nil {
			return err
		}
		var done bool
		err = l.run.exec.Read(e.timeSource.Now(), func(rctx chasm.Context, c chasm.Component) error {
			var err error
			done, err = predicate(rctx, c)
			return err
		})
		changed := l.run.exec.Changed()
		entry, cache := l.entry, l.shard.cache
		if entry != nil && err == nil && !done {
			// Keeps the entry, and the execution whose signal this waits on, in the cache.
			cache.addWaiter(entry)
		}
		l.release()
		if err != nil || done {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
		}
		if entry != nil {
			cache.removeWaiter(entry)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

var _ chasm.Lister = (*Engine)(nil)

// ListExecutions implements chasm.Lister over the store (all shards).
func (e *Engine) ListExecutions(ctx context.Context, req chasm.ListRequest) (*chasm.ListResponse, error) {
	rc, ok := e.registry.Component(req.Archetype)
	if !ok {
		return nil, serviceerror.NewInvalidArgument(fmt.Sprintf("unknown archetype %q", req.Archetype))
	}
	if req.PageSize <= 0 {
		return nil, serviceerror.NewInvalidArgument("page size must be positive")
	}
	resp, err := e.store.ListExecutions(ctx, persistence.ListExecutionsRequest{
		NamespaceID: req.NamespaceID, ArchetypeID: rc.ID(),
		Status: req.Filter.Status, TaskQueue: req.Filter.TaskQueue, Visibility: req.Visibility,
		PageSize: req.PageSize, NextPageToken: req.NextPageToken,
	})
	if err != nil {
		return nil, listError(req, "list", err)
	}
	out := &chasm.ListResponse{NextPageToken: resp.NextPageToken}
	for _, record := range resp.Executions {
		key := chasm.ExecutionKey{NamespaceID: record.Key.NamespaceID, BusinessID: record.Key.BusinessID, RunID: record.Key.RunID}
		state := record.State
		// A run of a shard this host owns may hold deferred changes the store does not have
		// yet: list what a read would show.
		if shard := e.controller.ownedShard(key.NamespaceID, key.BusinessID); shard != nil {
			ckey := cacheKey{archetypeID: record.Key.ArchetypeID, namespaceID: key.NamespaceID, businessID: key.BusinessID}
			if unwritten, ok := shard.cache.unwrittenState(ctx, ckey, key.RunID); ok {
				state = unwritten
			}
		}
		c, err := rc.DecodeComponent(state)
		if err != nil {
			// One corrupt row must not hide every other: count it, log it, skip it.
			metrics.CorruptExecutions.With(e.scope).Inc(1)
			e.logger.Error("corrupt execution skipped in listing", tag.Archetype(rc.FullName()),
				tag.NamespaceID(key.NamespaceID), tag.BusinessID(key.BusinessID), tag.RunID(key.RunID), tag.Error(err))
			continue
		}
		out.Executions = append(out.Executions, chasm.ListedExecution{Key: key, Component: c})
	}
	return out, nil
}

// CountExecutions implements chasm.Lister.
func (e *Engine) CountExecutions(ctx context.Context, req chasm.ListRequest) (int64, error) {
	rc, ok := e.registry.Component(req.Archetype)
	if !ok {
		return 0, serviceerror.NewInvalidArgument(fmt.Sprintf("unknown archetype %q", req.Archetype))
	}
	n, err := e.store.CountExecutions(ctx, persistence.ListExecutionsRequest{
		NamespaceID: req.NamespaceID, ArchetypeID: rc.ID(), Status: req.Filter.Status, TaskQueue: req.Filter.TaskQueue,
	})
	if err != nil {
		return 0, serviceerror.NewUnavailable(fmt.Sprintf("count %s executions: %v", req.Archetype, err))
	}
	return n, nil
}

var _ chasm.VisibilityLister = (*Engine)(nil)

// CountVisibility implements chasm.VisibilityLister over the store (all shards).
func (e *Engine) CountVisibility(ctx context.Context, req chasm.ListRequest) (int64, map[int32]int64, error) {
	rc, ok := e.registry.Component(req.Archetype)
	if !ok {
		return 0, nil, serviceerror.NewInvalidArgument(fmt.Sprintf("unknown archetype %q", req.Archetype))
	}
	if req.Visibility == nil {
		return 0, nil, serviceerror.NewInvalidArgument("a visibility count needs a visibility query")
	}
	total, byStatus, err := e.store.CountVisibility(ctx, persistence.ListExecutionsRequest{
		NamespaceID: req.NamespaceID, ArchetypeID: rc.ID(), Visibility: req.Visibility,
	})
	if err != nil {
		return 0, nil, listError(req, "count", err)
	}
	return total, byStatus, nil
}

// listError is a store's listing failure as the caller sees it: a token the store did not
// hand out, or a visibility query it cannot compile, is the caller's (InvalidArgument); any
// other failure is the store's (Unavailable, which clients retry).
func listError(req chasm.ListRequest, what string, err error) error {
	if errors.Is(err, persistence.ErrInvalidListRequest) {
		return serviceerror.NewInvalidArgument(fmt.Sprintf("%s %s executions: %v", what, req.Archetype, err))
	}
	return serviceerror.NewUnavailable(fmt.Sprintf("%s %s executions: %v", what, req.Archetype, err))
}

// BackfillVisibility gives the executions of every VisibilityComponent archetype written
// before the store kept visibility records theirs (once per archetype: the store remembers).
// The engine runs it at Start, before it serves.
func (e *Engine) BackfillVisibility(ctx context.Context) error {
	for _, rc := range e.registry.Components() {
		if !rc.HasVisibility() {
			continue
		}
		n, err := e.store.BackfillVisibility(ctx, rc.ID(), func(state []byte) (*visibility.Record, error) {
			c, err := rc.DecodeComponent(state)
			if err != nil {
				return nil, err
			}
			if vc, ok := c.(chasm.VisibilityComponent); ok {
				return vc.Visibility(), nil
			}
			return nil, nil
		})
		if err != nil {
			return fmt.Errorf("history: backfill the visibility of %s: %w", rc.FullName(), err)
		}
		if n > 0 {
			e.logger.Info("visibility records backfilled", tag.Archetype(rc.FullName()), zap.Int("executions", n))
		}
	}
	return nil
}

// ClusterHost is one live member of the cluster with the shards whose ownership row names it.
type ClusterHost struct {
	membership.Host
	Shards []int32
}

// DescribeCluster returns the live members, sorted by ID, with the shards each owns according
// to the shard rows (the range_id holders, not this host's guess), and the shards whose owner
// is no live member.
func (e *Engine) DescribeCluster(ctx context.Context) (hosts []ClusterHost, unowned []int32, err error) {
	members := e.controller.monitor.Members()
	index := make(map[string]int, len(members))
	for i, m := range members {
		hosts = append(hosts, ClusterHost{Host: m})
		index[m.ID] = i
	}
	for id := int32(1); id <= e.config.NumShards; id++ {
		info, err := e.store.GetShard(ctx, id)
		var notFound *persistence.NotFoundError
		switch {
		case errors.As(err, &notFound):
			unowned = append(unowned, id)
			continue
		case err != nil:
			return nil, nil, serviceerror.NewUnavailable(fmt.Sprintf("read shard %d: %v", id, err))
		}
		if i, ok := index[info.Owner]; ok {
			hosts[i].Shards = append(hosts[i].Shards, id)
		} else {
			unowned = append(unowned, id)
		}
	}
	return hosts, unowned, nil
}
