package matching

import (
	"github.com/uber-go/tally/v4"

	"github.com/vigilhq/vigil/common/metrics"
)

// Matching's metrics. None is tagged with a task queue, control queue or worker: those are
// created by users and would make the series unbounded.
var (
	// TasksAdded counts activity tasks accepted by AddActivityTask (new or superseding).
	TasksAdded = metrics.NewCounterDef("matching_tasks_added", "Activity tasks accepted by AddActivityTask (new or superseding).")
	// TasksDeduplicated counts AddActivityTask calls ignored because a task with the same or a
	// newer stamp was already queued, and returned tasks dropped because a newer one was.
	TasksDeduplicated = metrics.NewCounterDef("matching_tasks_deduplicated", "AddActivityTask calls ignored because a task with the same or a newer stamp was queued, and returned tasks dropped because a newer one was.")
	// TasksReturned counts tasks put back at the head of their queue because they could not be
	// delivered (ReturnActivityTask, or a poll cancelled just after a task was handed to it).
	TasksReturned = metrics.NewCounterDef("matching_tasks_returned", "Tasks put back at the head of their queue because they could not be delivered.")
	// TasksDispatched counts tasks returned by PollActivityTask, from the backlog or matched.
	TasksDispatched = metrics.NewCounterDef("matching_tasks_dispatched", "Activity tasks handed to a worker's poll, from the backlog or matched at once.")
	// SyncMatches counts dispatched tasks that went straight to a waiting poll.
	SyncMatches = metrics.NewCounterDef("matching_sync_match", "Dispatched activity tasks that went straight to a waiting poll.")
	// PollTimeouts counts activity polls answered empty because their wait ran out.
	PollTimeouts = metrics.NewCounterDef("matching_poll_timeouts", "Activity polls answered empty because their wait ran out.")
	// Backlog is the number of activity tasks queued on this host, all queues together.
	Backlog = metrics.NewGaugeDef("matching_backlog", "Activity tasks queued on this host, all task queues together.")
	// BacklogRejected counts AddActivityTask calls refused because the queue was at its cap.
	BacklogRejected = metrics.NewCounterDef("matching_backlog_rejected", "AddActivityTask calls refused because the task queue was at its cap.")
	// CommandsDelivered counts worker commands returned by PollWorkerCommand, redeliveries
	// included.
	CommandsDelivered = metrics.NewCounterDef("matching_commands_delivered", "Worker commands returned by PollWorkerCommand, redeliveries included.")
	// CommandsAcked counts worker commands acknowledged.
	CommandsAcked = metrics.NewCounterDef("matching_commands_acked", "Worker commands acknowledged by their worker.")
	// CommandsExpired counts worker commands dropped unacknowledged after CommandTTL.
	CommandsExpired = metrics.NewCounterDef("matching_commands_expired", "Worker commands dropped unacknowledged after their time to live.")
	// CommandsRejected counts AddWorkerCommand calls refused because the control queue was at
	// its cap.
	CommandsRejected = metrics.NewCounterDef("matching_commands_rejected", "AddWorkerCommand calls refused because the control queue was at its cap.")
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
	CallsForwarded = metrics.NewCounterDef("matching_calls_forwarded", "Matching calls sent to the task queue's owner on another host, by operation.", metrics.TagOperation)
	// TasksHandedOver counts queued activity tasks a host gave to a queue's new owner after a
	// membership change moved the queue, as accepted by the new owner.
	TasksHandedOver = metrics.NewCounterDef("matching_tasks_handed_over", "Queued activity tasks handed to a task queue's new owner after a membership change.")
)
