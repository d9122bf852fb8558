package tasks

import (
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/persistence"
)

// Metric names. Plain strings until common/metrics declares them; every scope is tagged with
// queue=timer or queue=outbound (no per-shard tag: shard counts make it high-cardinality).
const (
	MetricTimerTasksFired = "timer_tasks_fired"
	MetricTimerTaskLag    = "timer_task_lag"
	MetricTaskErrors      = "task_errors"
	MetricTasksParked     = "tasks_parked"
	// MetricTimerTasksDeferred counts timer tasks that declined to run and asked to be
	// offered again later (Defer).
	MetricTimerTasksDeferred   = "timer_tasks_deferred"
	MetricTimerTasksSuperseded = "timer_tasks_superseded"
	MetricTimerQueueInMemory   = "timer_queue_in_memory"
	MetricTimerTasksStuck      = "timer_tasks_stuck"
	MetricOutboundTaskAttempts = "outbound_task_attempts"
	MetricOutboundTaskFailures = "outbound_task_failures"
	MetricOutboundTaskBacklog  = "outbound_task_backlog"
	MetricOutboundTasksStuck   = "outbound_tasks_stuck"
	MetricTaskReadErrors       = "task_read_errors"

	metricTagQueue = "queue"
)

func executionFields(k persistence.ExecutionKey) []zap.Field {
	return []zap.Field{
		zap.String("namespace-id", k.NamespaceID),
		zap.Uint32("archetype-id", k.ArchetypeID),
		zap.String("business-id", k.BusinessID),
		zap.String("run-id", k.RunID),
	}
}

func timerTaskFields(t *persistence.TimerTask) []zap.Field {
	return append([]zap.Field{
		zap.Int32("shard-id", t.ShardID),
		zap.Int64("task-id", t.TaskID),
		zap.Uint32("task-type-id", t.TaskTypeID),
		zap.Time("visibility-time", t.VisibilityTime),
	}, executionFields(t.Execution)...)
}

func outboundTaskFields(t *persistence.OutboundTask) []zap.Field {
	return append([]zap.Field{
		zap.Int32("shard-id", t.ShardID),
		zap.Int64("task-id", t.TaskID),
		zap.Uint32("task-type-id", t.TaskTypeID),
		zap.String("destination", t.Destination),
	}, executionFields(t.Execution)...)
}
