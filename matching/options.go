package matching

import "time"

// Defaults, used when the corresponding Options field is zero or negative.
const (
	// MaxPollWaitDefault is the longest a poll waits for a task before answering empty. The SDK
	// gives task-queue polls a 70 s deadline; the real server answers after 60 s.
	MaxPollWaitDefault = 60 * time.Second
	// PollDeadlineMarginDefault is how long before the caller's deadline an empty poll is
	// answered, so the empty response reaches the client before its deadline does (a
	// DeadlineExceeded makes the SDK log a failure and back off) and so that a task matched
	// just before the deadline still leaves the frontend time to record its start.
	PollDeadlineMarginDefault = time.Second
	// BacklogCapDefault is the most tasks one task queue holds. Beyond it AddActivityTask is
	// refused (see ErrBacklogFull).
	BacklogCapDefault = 100_000
	// QueueIdleTimeoutDefault is how long a queue must be empty and unpolled before it is
	// dropped from memory.
	QueueIdleTimeoutDefault = 5 * time.Minute
	// ShutdownTombstoneTTLDefault is how long, after CompletePollsOfWorker, new polls carrying
	// that worker's instance key are answered empty at once. It only has to outlast polls that
	// were already in flight when ShutdownWorker arrived.
	ShutdownTombstoneTTLDefault = 10 * time.Second
	// CommandTTLDefault is how long a worker command is kept, delivered or not, before it is
	// dropped unacknowledged. Commands are best effort: the activity heartbeat's
	// cancel_requested and the activity's own timeouts are the fallback.
	CommandTTLDefault = 30 * time.Second
	// CommandAckTimeoutDefault is how long a delivered command waits for its acknowledgement
	// (RespondNexusTaskCompleted) before it is delivered again.
	CommandAckTimeoutDefault = 10 * time.Second
	// CommandQueueCapDefault is the most commands one control queue holds.
	CommandQueueCapDefault = 1000
	// SweepIntervalDefault is how often the background sweep runs: it redelivers and expires
	// commands, expires shutdown tombstones and drops idle queues.
	SweepIntervalDefault = time.Second
	// PollerHistoryTTLDefault is how long a worker identity stays in a task queue's poller
	// list (DescribeActivityQueue) after its last poll, as Temporal's matching.PollerHistoryTTL.
	// A worker's ShutdownWorker removes it at once.
	PollerHistoryTTLDefault = 5 * time.Minute
)

// Options configures a Matcher. Every zero or negative field means its default. Options are
// read once, by New.
type Options struct {
	MaxPollWait          time.Duration
	PollDeadlineMargin   time.Duration
	BacklogCap           int
	QueueIdleTimeout     time.Duration
	ShutdownTombstoneTTL time.Duration
	CommandTTL           time.Duration
	CommandAckTimeout    time.Duration
	CommandQueueCap      int
	SweepInterval        time.Duration
	PollerHistoryTTL     time.Duration

	// TestHooks is nil in production.
	TestHooks *TestHooks
}

// TestHooks lets tests wait for matcher events instead of sleeping. Hooks run on the caller's
// or the sweeper's goroutine, never under the matcher's lock, and must return quickly.
type TestHooks struct {
	// PollWaiting is called once a poll has found nothing, has been queued as a waiter and has
	// armed its deadline timer: from then on an added task or command is handed to it and
	// moving the clock to its deadline ends it. queue is the task queue or control queue.
	PollWaiting func(queue string)
	// Swept is called after each background sweep, once the next sweep's timer is armed.
	Swept func()
}

func (o Options) withDefaults() Options {
	orDuration := func(v, def time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return def
	}
	orInt := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	o.MaxPollWait = orDuration(o.MaxPollWait, MaxPollWaitDefault)
	o.PollDeadlineMargin = orDuration(o.PollDeadlineMargin, PollDeadlineMarginDefault)
	o.BacklogCap = orInt(o.BacklogCap, BacklogCapDefault)
	o.QueueIdleTimeout = orDuration(o.QueueIdleTimeout, QueueIdleTimeoutDefault)
	o.ShutdownTombstoneTTL = orDuration(o.ShutdownTombstoneTTL, ShutdownTombstoneTTLDefault)
	o.CommandTTL = orDuration(o.CommandTTL, CommandTTLDefault)
	o.CommandAckTimeout = orDuration(o.CommandAckTimeout, CommandAckTimeoutDefault)
	o.CommandQueueCap = orInt(o.CommandQueueCap, CommandQueueCapDefault)
	o.SweepInterval = orDuration(o.SweepInterval, SweepIntervalDefault)
	o.PollerHistoryTTL = orDuration(o.PollerHistoryTTL, PollerHistoryTTLDefault)
	return o
}
