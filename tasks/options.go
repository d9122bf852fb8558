package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/persistence"
)

// Timer queue defaults, used when the corresponding option is nil or returns a value <= 0.
const (
	// TimerQueueLookAheadDefault is how far ahead of now the timer queue reads tasks into
	// memory. The window is re-read every LookAhead/2, so a task written beyond it without a
	// notification is still in memory well before it is due.
	TimerQueueLookAheadDefault = 30 * time.Second
	// TimerQueuePageSizeDefault is the most tasks one read asks the store for.
	TimerQueuePageSizeDefault = 500
	// TimerQueueMaxInMemoryDefault caps the tasks a shard's timer queue holds (waiting, retrying
	// or executing). Reads stop at the cap and resume once a page (or half the cap) fits.
	TimerQueueMaxInMemoryDefault = 10_000
	// TimerQueueRetryInitialIntervalDefault is the backoff after a task's first failure.
	TimerQueueRetryInitialIntervalDefault = 100 * time.Millisecond
	// TimerQueueRetryMaxIntervalDefault caps the retry backoff.
	TimerQueueRetryMaxIntervalDefault = 30 * time.Second
	// TimerQueueAlertAttemptsDefault is the failure count at which a task is logged as an error
	// and counted as stuck.
	TimerQueueAlertAttemptsDefault = 10
	// TimerQueueOverdueFireRateDefault is the tasks per second fired for tasks that came due
	// while the queue was not running (and for grace-deferred tasks).
	TimerQueueOverdueFireRateDefault = 1000
	// TimerQueueOverdueFireBurstDefault is the burst of that limiter.
	TimerQueueOverdueFireBurstDefault = 100
	// TimerQueueRecentlyCompletedDefault is how many completed task keys the queue remembers to
	// drop late duplicates.
	TimerQueueRecentlyCompletedDefault = 4096
)

// TimerQueueOptions configures a TimerQueue. Every setting is a function so that dynamic config
// applies without a restart; a nil function or a result <= 0 means the default. Values are
// validated once, by NewTimerQueue.
type TimerQueueOptions struct {
	LookAhead            func() time.Duration
	PageSize             func() int
	MaxInMemory          func() int
	RetryInitialInterval func() time.Duration
	RetryMaxInterval     func() time.Duration
	AlertAttempts        func() int
	OverdueFireRate      func() int
	OverdueFireBurst     func() int
	// GracePeriod returns the restart grace of a task: such a task does not fire before the
	// queue's start time + grace. The host decides which tasks get one (history: tasks of a
	// type registered WithRestartGrace that were written before it acquired the shard). nil
	// or 0 means no grace.
	GracePeriod func(task *persistence.TimerTask) time.Duration
	// RecentlyCompleted sizes the set of completed keys kept for deduplication. Fixed at
	// construction.
	RecentlyCompleted int

	// TestHooks is nil in production.
	TestHooks *TimerQueueTestHooks
}

// TimerQueueTestHooks lets tests wait for queue events instead of sleeping. Hooks run
// synchronously on the queue's goroutines, never under its lock, and must return quickly.
type TimerQueueTestHooks struct {
	// OnRead is called after a page read is applied, with the tasks it returned and the tasks
	// held in memory afterwards.
	OnRead func(read, inMemory int)
	// OnFired is called just before the executor runs a task; now is the queue's clock.
	OnFired func(task *persistence.TimerTask, attempt int, now time.Time)
	// OnCompleted is called after a task was executed and deleted.
	OnCompleted func(task *persistence.TimerTask)
	// OnFailed is called after a failed attempt, before its retry is scheduled.
	OnFailed func(task *persistence.TimerTask, attempt int, err error)
}

// Outbound queue defaults, used when the corresponding option is nil or returns a value <= 0.
const (
	// OutboundQueuePageSizeDefault is the most tasks one read asks the store for.
	OutboundQueuePageSizeDefault = 500
	// OutboundQueueMaxInMemoryDefault caps the tasks a shard's outbound queue holds. Reading
	// stops at the cap and resumes once a page (or half the cap) fits.
	OutboundQueueMaxInMemoryDefault = 10_000
	// OutboundQueueMaxPerDestinationDefault caps the tasks held for one destination, so a
	// destination that keeps failing cannot take the whole in-memory budget from the others.
	// Tasks beyond it are left in the store and read again once the destination drains.
	OutboundQueueMaxPerDestinationDefault = 1000
	// OutboundQueueDestinationConcurrencyDefault bounds the tasks of one destination that are
	// executing or waiting to retry at once.
	OutboundQueueDestinationConcurrencyDefault = 16
	// OutboundQueuePollIntervalDefault is how often the queue reads without a notification, as
	// a safety net for a lost one.
	OutboundQueuePollIntervalDefault = 5 * time.Second
	// OutboundQueueRetryInitialIntervalDefault is the backoff after a task's first failure.
	OutboundQueueRetryInitialIntervalDefault = 100 * time.Millisecond
	// OutboundQueueRetryMaxIntervalDefault caps the retry backoff; a task that keeps failing
	// keeps retrying at about this interval.
	OutboundQueueRetryMaxIntervalDefault = 30 * time.Second
	// OutboundQueueAlertAttemptsDefault is the failure count at which a task is logged as an
	// error and counted as stuck.
	OutboundQueueAlertAttemptsDefault = 10
	// OutboundQueueRecentlyCompletedDefault is how many completed task IDs the queue remembers
	// to drop late duplicates.
	OutboundQueueRecentlyCompletedDefault = 4096
)

// OutboundQueueOptions configures an OutboundQueue, with the same conventions as
// TimerQueueOptions.
type OutboundQueueOptions struct {
	PageSize               func() int
	MaxInMemory            func() int
	MaxPerDestination      func() int
	DestinationConcurrency func() int
	PollInterval           func() time.Duration
	RetryInitialInterval   func() time.Duration
	RetryMaxInterval       func() time.Duration
	AlertAttempts          func() int
	RecentlyCompleted      int
	// Yield, when set, is called by the queue's loop before it hands ready background tasks
	// (Yields) to the scheduler, and may block to let the host's own calls go first (history:
	// while calls wait for admission, up to a bound). It must return soon once ctx ends.
	// Tasks that do not yield go to the scheduler first, without waiting for it.
	Yield func(ctx context.Context)
	// Yields says whether a task is background work that waits for Yield. Nil: every task.
	Yields func(task *persistence.OutboundTask) bool

	// TestHooks is nil in production.
	TestHooks *OutboundQueueTestHooks
}

// OutboundQueueTestHooks lets tests wait for queue events instead of sleeping, with the same
// rules as TimerQueueTestHooks.
type OutboundQueueTestHooks struct {
	OnRead      func(read, inMemory int)
	OnAttempt   func(task *persistence.OutboundTask, attempt int)
	OnCompleted func(task *persistence.OutboundTask)
	OnFailed    func(task *persistence.OutboundTask, attempt int, err error)
}

type number interface{ ~int | ~int64 }

// withDefault wraps a dynamic setting so that nil or a non-positive value reads as def: a bad
// dynamic-config value degrades to the default instead of stopping the queue.
func withDefault[T number](f func() T, def T) func() T {
	if f == nil {
		return func() T { return def }
	}
	return func() T {
		if v := f(); v > 0 {
			return v
		}
		return def
	}
}

// validateSetting is the one-time check: a configured value must not be negative (zero means
// default).
func validateSetting[T number](name string, f func() T) {
	if f != nil {
		if v := f(); v < 0 {
			panic(fmt.Sprintf("tasks: option %s must not be negative, got %v", name, v))
		}
	}
}

type timerQueueConfig struct {
	lookAhead         func() time.Duration
	pageSize          func() int
	maxInMemory       func() int
	retry             retryPolicy
	overdueFireRate   func() int
	overdueFireBurst  func() int
	gracePeriod       func(*persistence.TimerTask) time.Duration
	recentlyCompleted int
	hooks             TimerQueueTestHooks
}

func (o TimerQueueOptions) resolve() timerQueueConfig {
	validateSetting("LookAhead", o.LookAhead)
	validateSetting("PageSize", o.PageSize)
	validateSetting("MaxInMemory", o.MaxInMemory)
	validateSetting("RetryInitialInterval", o.RetryInitialInterval)
	validateSetting("RetryMaxInterval", o.RetryMaxInterval)
	validateSetting("AlertAttempts", o.AlertAttempts)
	validateSetting("OverdueFireRate", o.OverdueFireRate)
	validateSetting("OverdueFireBurst", o.OverdueFireBurst)
	c := timerQueueConfig{
		lookAhead:   withDefault(o.LookAhead, TimerQueueLookAheadDefault),
		pageSize:    withDefault(o.PageSize, TimerQueuePageSizeDefault),
		maxInMemory: withDefault(o.MaxInMemory, TimerQueueMaxInMemoryDefault),
		retry: retryPolicy{
			initialInterval: withDefault(o.RetryInitialInterval, TimerQueueRetryInitialIntervalDefault),
			maxInterval:     withDefault(o.RetryMaxInterval, TimerQueueRetryMaxIntervalDefault),
			alertAttempts:   withDefault(o.AlertAttempts, TimerQueueAlertAttemptsDefault),
		},
		overdueFireRate:   withDefault(o.OverdueFireRate, TimerQueueOverdueFireRateDefault),
		overdueFireBurst:  withDefault(o.OverdueFireBurst, TimerQueueOverdueFireBurstDefault),
		gracePeriod:       o.GracePeriod,
		recentlyCompleted: o.RecentlyCompleted,
	}
	if c.gracePeriod == nil {
		c.gracePeriod = func(*persistence.TimerTask) time.Duration { return 0 }
	}
	if c.recentlyCompleted <= 0 {
		c.recentlyCompleted = TimerQueueRecentlyCompletedDefault
	}
	if o.TestHooks != nil {
		c.hooks = *o.TestHooks
	}
	c.retry.validate()
	return c
}

type outboundQueueConfig struct {
	pageSize               func() int
	maxInMemory            func() int
	maxPerDestination      func() int
	destinationConcurrency func() int
	pollInterval           func() time.Duration
	retry                  retryPolicy
	recentlyCompleted      int
	yield                  func(ctx context.Context)
	yields                 func(task *persistence.OutboundTask) bool
	hooks                  OutboundQueueTestHooks
}

func (o OutboundQueueOptions) resolve() outboundQueueConfig {
	validateSetting("PageSize", o.PageSize)
	validateSetting("MaxInMemory", o.MaxInMemory)
	validateSetting("MaxPerDestination", o.MaxPerDestination)
	validateSetting("DestinationConcurrency", o.DestinationConcurrency)
	validateSetting("PollInterval", o.PollInterval)
	validateSetting("RetryInitialInterval", o.RetryInitialInterval)
	validateSetting("RetryMaxInterval", o.RetryMaxInterval)
	validateSetting("AlertAttempts", o.AlertAttempts)
	c := outboundQueueConfig{
		pageSize:               withDefault(o.PageSize, OutboundQueuePageSizeDefault),
		maxInMemory:            withDefault(o.MaxInMemory, OutboundQueueMaxInMemoryDefault),
		maxPerDestination:      withDefault(o.MaxPerDestination, OutboundQueueMaxPerDestinationDefault),
		destinationConcurrency: withDefault(o.DestinationConcurrency, OutboundQueueDestinationConcurrencyDefault),
		pollInterval:           withDefault(o.PollInterval, OutboundQueuePollIntervalDefault),
		retry: retryPolicy{
			initialInterval: withDefault(o.RetryInitialInterval, OutboundQueueRetryInitialIntervalDefault),
			maxInterval:     withDefault(o.RetryMaxInterval, OutboundQueueRetryMaxIntervalDefault),
			alertAttempts:   withDefault(o.AlertAttempts, OutboundQueueAlertAttemptsDefault),
		},
		recentlyCompleted: o.RecentlyCompleted,
		yield:             o.Yield,
		yields:            o.Yields,
	}
	if c.recentlyCompleted <= 0 {
		c.recentlyCompleted = OutboundQueueRecentlyCompletedDefault
	}
	if o.TestHooks != nil {
		c.hooks = *o.TestHooks
	}
	c.retry.validate()
	return c
}
