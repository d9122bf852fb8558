package matching

import (
	"github.com/uber-go/tally/v4"

	"github.com/vigilhq/vigil/common/metrics"
)

// Matching's metrics. None is tagged with a task queue, control queue or worker: those are
// created by users and would make the series unbounded.
var (
	// TasksAdded counts activity tasks accepted by AddActivityTask (new or superseding).
	TasksAdded = metrics.NewCounterDef("matching_tasks_added")
	// TasksDeduplicated counts AddActivityTask calls ignored because a task with the same or a
	// newer stamp was already queued, and returned tasks dropped because a newer one was.
	TasksDeduplicated = metrics.NewCounterDef("matching_tasks_deduplicated")
	// TasksReturned counts tasks put back at the head of their queue because they could not be
	// delivered (ReturnActivityTask, or a poll cancelled just after a task was handed to it).
	TasksReturned = metrics.NewCounterDef("matching_tasks_returned")
	// TasksDispatched counts tasks returned by PollActivityTask, from the backlog or matched.
	TasksDispatched = metrics.NewCounterDef("matching_tasks_dispatched")
	// SyncMatches counts dispatched tasks that went straight to a waiting poll.
	SyncMatches = metrics.NewCounterDef("matching_sync_match")
	// PollTimeouts counts activity polls answered empty because their wait ran out.
	PollTimeouts = metrics.NewCounterDef("matching_poll_timeouts")
	// Backlog is the number of activity tasks queued on this host, all queues together.
	Backlog = metrics.NewGaugeDef("matching_backlog")
	// BacklogRejected counts AddActivityTask calls refused because the queue was at its cap.
	BacklogRejected = metrics.NewCounterDef("matching_backlog_rejected")
	// CommandsDelivered counts worker commands returned by PollWorkerCommand, redeliveries
	// included.
	CommandsDelivered = metrics.NewCounterDef("matching_commands_delivered")
	// CommandsAcked counts worker commands acknowledged.
	CommandsAcked = metrics.NewCounterDef("matching_commands_acked")
	// CommandsExpired counts worker commands dropped unacknowledged after CommandTTL.
	CommandsExpired = metrics.NewCounterDef("matching_commands_expired")
	// CommandsRejected counts AddWorkerCommand calls refused because the control queue was at
	// its cap.
	CommandsRejected = metrics.NewCounterDef("matching_commands_rejected")
)

// matcherMetrics resolves every metric once, so the hot paths do not look them up per call.
type matcherMetrics struct {
	tasksAdded, tasksDeduplicated, tasksReturned, tasksDispatched tally.Counter
	syncMatches, pollTimeouts, backlogRejected                    tally.Counter
	backlog                                                       tally.Gauge
	commandsDelivered, commandsAcked, commandsExpired             tally.Counter
	commandsRejected                                              tally.Counter
}

func newMatcherMetrics(scope tally.Scope) matcherMetrics {
	return matcherMetrics{
		tasksAdded:        TasksAdded.With(scope),
		tasksDeduplicated: TasksDeduplicated.With(scope),
		tasksReturned:     TasksReturned.With(scope),
		tasksDispatched:   TasksDispatched.With(scope),
		syncMatches:       SyncMatches.With(scope),
		pollTimeouts:      PollTimeouts.With(scope),
		backlogRejected:   BacklogRejected.With(scope),
		backlog:           Backlog.With(scope),
		commandsDelivered: CommandsDelivered.With(scope),
		commandsAcked:     CommandsAcked.With(scope),
		commandsExpired:   CommandsExpired.With(scope),
		commandsRejected:  CommandsRejected.With(scope),
	}
}

// Cluster metrics (Client): how much matching traffic crosses hosts.
var (
	// CallsForwarded counts matching calls sent to the queue's owner on another host, by
	// operation (PollActivityTask, AddActivityTask, HandOver, ...).
	CallsForwarded = metrics.NewCounterDef("matching_calls_forwarded", metrics.TagOperation)
	// TasksHandedOver counts queued activity tasks a host gave to a queue's new owner after a
	// membership change moved the queue, as accepted by the new owner.
	TasksHandedOver = metrics.NewCounterDef("matching_tasks_handed_over")
)
