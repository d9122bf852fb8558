package activity

import (
	"github.com/vigilhq/vigil/common/metrics"
)

// Metrics of the Activity component, recorded under the "activity" scope. common/metrics
// declares none of these yet; they are declared here, once, in the same way (docs/metrics.md lists them).
var (
	// ActivitiesStarted counts runs created by StartActivity.
	ActivitiesStarted = metrics.NewCounterDef("activities_started", "Standalone activity runs created by StartActivityExecution.")
	// ActivityAttemptsStarted counts attempts taken by a worker's poll.
	ActivityAttemptsStarted = metrics.NewCounterDef("activity_attempts_started", "Activity attempts taken by a worker's poll.")
	// ActivitiesClosed counts runs that reached a terminal status, by status (COMPLETED,
	// FAILED, CANCELED, TIMED_OUT).
	ActivitiesClosed = metrics.NewCounterDef("activities_closed", "Activity runs that reached a terminal status, by status (state).", metrics.TagState).
				WithValues(metrics.TagState, "COMPLETED", "FAILED", "CANCELED", "TIMED_OUT", "TERMINATED")
	// ActivitiesTimedOut counts timeouts by kind (StartToClose, Heartbeat, ScheduleToStart,
	// ScheduleToClose), whether they closed the activity or were retried.
	ActivitiesTimedOut = metrics.NewCounterDef("activity_timeouts", "Activity timeouts by kind (StartToClose, Heartbeat, ScheduleToStart, ScheduleToClose), whether they closed the activity or were retried.", metrics.TagKind).
				WithValues(metrics.TagKind, "StartToClose", "Heartbeat", "ScheduleToStart", "ScheduleToClose")
	// ActivityRetries counts attempts scheduled after a failed one.
	ActivityRetries = metrics.NewCounterDef("activity_retries", "Activity attempts scheduled after a failed one.")
	// ActivityReschedules counts attempts taken from a lost worker, by how the loss was learnt
	// (kind "worker_inactive": the Worker component's reschedule; "bind_refused": the worker
	// was already inactive when the attempt was bound to it) and outcome.
	ActivityReschedules = metrics.NewCounterDef("activity_reschedules", "Activity attempts taken from a lost worker, by how the loss was learnt (kind) and outcome (state).", metrics.TagKind, metrics.TagState)
	// ActivityOrphansRescheduled counts a live worker's orphaned attempts (its heartbeats showed
	// it does not run them) taken back on their shard, by why the worker side picked each
	// (unseen_dispatch, unheard_completion, dispatched_near_restart, slot_mismatch) and what became of it
	// (rescheduled, failed, canceled, or alive: it recorded an activity heartbeat since the
	// suspicion, so it was left running and bound again). Also in activity_reschedules under
	// kind "orphaned".
	ActivityOrphansRescheduled = metrics.NewCounterDef("activity_orphans_rescheduled", "Orphaned attempts of a live worker taken back on their shard, by why they were picked (reason) and what became of them (state).", metrics.TagReason, metrics.TagState)
	// ActivityRescheduleDispatchLatency times a lost worker's attempt from the moment the worker
	// was declared INACTIVE (its lease expired, or it shut down) to the hand-over of the next
	// attempt to matching: liveness's detection-to-re-dispatch latency.
	ActivityRescheduleDispatchLatency = metrics.NewTimerDef("activity_reschedule_dispatch_latency", "Time from a worker being declared INACTIVE to the hand-over of its activity's next attempt to matching.")
	// ActivityStaleResponsesRefused counts worker calls refused because they named an attempt
	// that is no longer current (a lost worker's late completion), by operation.
	ActivityStaleResponsesRefused = metrics.NewCounterDef("activity_stale_responses_refused", "Worker calls refused because they named an attempt that is no longer current, by operation.", metrics.TagOperation)
	// ActivityCancelCommandsDropped counts CancelActivity commands given up after
	// activity.cancelCommandMaxAttempts failed deliveries.
	ActivityCancelCommandsDropped = metrics.NewCounterDef("activity_cancel_commands_dropped", "CancelActivity commands given up after activity.cancelCommandMaxAttempts failed deliveries.")
)

// ActivityAttemptsRequeued counts dispatched attempts handed to matching again by a recovery
// scan, by why the scan ran (kind "start": the host started; "membership_change": cluster
// members changed, so task queues moved between hosts).
var ActivityAttemptsRequeued = metrics.NewCounterDef("activity_attempts_requeued", "Dispatched activity attempts handed to matching again by a recovery scan, by why it ran (kind: start, membership_change).", metrics.TagKind).
	WithValues(metrics.TagKind, "start", "membership_change")
