package activity

import (
	"fmt"
	"time"

	"github.com/vigilhq/vigil/chasm/worker"
	"github.com/vigilhq/vigil/common/shard"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// Dynamic config settings of the Activity component. Namespace settings are read with the
// namespace NAME (ActivityState.namespace), as they are declared.
var (
	LongPollMaxWait = dynamicconfig.NewGlobalDurationSetting(
		"activity.longPollMaxWait",
		LongPollMaxWaitDefault,
		`Longest a PollActivityExecution waits for the activity to close before answering
without an outcome (the SDK then polls again). It also answers a margin before the caller's
deadline.`,
	)
	RedispatchInterval = dynamicconfig.NewNamespaceDurationSetting(
		"activity.redispatchInterval",
		RedispatchIntervalDefault,
		`How long after its dispatch a still-waiting activity attempt is queued in matching again,
in case matching (which keeps tasks in memory only) lost it in a restart. Doubles with each
re-dispatch of the same attempt, up to activity.redispatchMaxInterval.`,
	)
	RedispatchMaxInterval = dynamicconfig.NewNamespaceDurationSetting(
		"activity.redispatchMaxInterval",
		RedispatchMaxIntervalDefault,
		`Longest interval between two dispatches of one waiting activity attempt.`,
	)
	BindRegistrationWait = dynamicconfig.NewNamespaceDurationSetting(
		"activity.bindRegistrationWait",
		BindRegistrationWaitDefault,
		`How long after an attempt started its worker may still register: an SDK worker polls
before its first heartbeat lands, so a worker starting into a backlog gets tasks while it has
no liveness record yet. Until then the attempt's bind is retried (after 250 ms, then doubling);
after it, an attempt of a worker that never registered (its heartbeats are off) is left to its
timeouts. 0 binds once.`,
	)
	CancelCommandMaxAttempts = dynamicconfig.NewNamespaceIntSetting(
		"activity.cancelCommandMaxAttempts",
		CancelCommandMaxAttemptsDefault,
		`Attempts to queue one CancelActivity worker command before it is dropped. Commands are
best effort: heartbeats answer cancel_requested and the timeouts still apply.`,
	)
)

const (
	// LongPollMaxWaitDefault matches the SDK's 60 s PollActivityExecution deadline: the
	// deadline margin, not this cap, normally ends the wait.
	LongPollMaxWaitDefault = 60 * time.Second
	// LongPollDeadlineMarginDefault is how long before the caller's deadline an outcome-less
	// answer is sent, so it arrives before the deadline does (the SDK gives up on
	// DeadlineExceeded rather than polling again).
	LongPollDeadlineMarginDefault = time.Second
	// RedispatchIntervalDefault and RedispatchMaxIntervalDefault bound how long an attempt
	// waits after matching lost it, against the cost of re-queuing a long backlog.
	RedispatchIntervalDefault    = time.Minute
	RedispatchMaxIntervalDefault = 10 * time.Minute
	// BindRegistrationWaitDefault covers an SDK worker's first heartbeat, sent as it starts,
	// with room for a slow start on a loaded machine.
	BindRegistrationWaitDefault = 10 * time.Second
	// rebindFirstDelay is the first retry of a bind that found no worker.
	rebindFirstDelay = 250 * time.Millisecond
	// CancelCommandMaxAttemptsDefault bounds how often one command is retried.
	CancelCommandMaxAttemptsDefault = 3
)

// Config is what the Activity component reads at use time.
type Config struct {
	// NumShards maps a worker instance key to the history shard that owns its liveness record.
	NumShards int32

	LongPollMaxWait          func() time.Duration
	LongPollDeadlineMargin   time.Duration
	CancelCommandMaxAttempts func(namespace string) int
	RedispatchInterval       func(namespace string) time.Duration
	RedispatchMaxInterval    func(namespace string) time.Duration
	BindRegistrationWait     func(namespace string) time.Duration
}

// NewConfig reads the settings from dynamic config.
func NewConfig(dc *dynamicconfig.Collection, numShards int32) *Config {
	return &Config{
		NumShards:                numShards,
		LongPollMaxWait:          LongPollMaxWait.Get(dc),
		LongPollDeadlineMargin:   LongPollDeadlineMarginDefault,
		CancelCommandMaxAttempts: CancelCommandMaxAttempts.Get(dc),
		RedispatchInterval:       RedispatchInterval.Get(dc),
		RedispatchMaxInterval:    RedispatchMaxInterval.Get(dc),
		BindRegistrationWait:     BindRegistrationWait.Get(dc),
	}
}

// workerDestination is the outbound destination for calls to a worker's liveness record: the
// worker's own history shard, so one unreachable shard holds up only its own calls.
func (c *Config) workerDestination(namespaceID, workerInstanceKey string) (string, error) {
	if c.NumShards <= 0 {
		return "", fmt.Errorf("activity: Config.NumShards is %d", c.NumShards)
	}
	return worker.RescheduleDestination(shard.ForKey(namespaceID, workerInstanceKey, c.NumShards)), nil
}

// redispatchAfter is the wait before the next dispatch of an attempt already dispatched n times.
func (c *Config) redispatchAfter(namespace string, n int32) time.Duration {
	interval, limit := c.RedispatchInterval(namespace), c.RedispatchMaxInterval(namespace)
	for i := int32(1); i < n && interval < limit; i++ {
		interval *= 2
	}
	return min(interval, limit)
}
