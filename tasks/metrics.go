package tasks

import (
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/metrics"

	"github.com/vigilhq/vigil/persistence"
)

// Metric names, declared in common/metrics (one place for every name, so two packages cannot
// export one name with different labels). Every scope is tagged with queue=timer or
// queue=outbound, and gauges with the shard as well.
var (
	MetricTimerTasksFired      = metrics.TimerTasksFired.Name()
	MetricTimerTaskLag         = metrics.TimerTaskLag.Name()
	MetricTimerTaskFailures    = metrics.TimerTaskFailures.Name()
	MetricTasksParked          = metrics.TasksParked.Name()
	MetricTimerTasksDeferred   = metrics.TimerTasksDeferred.Name()
	MetricTimerTasksSuperseded = metrics.TimerTasksSuperseded.Name()
	MetricTimerQueueInMemory   = metrics.TimerQueueInMemory.Name()
	MetricTimerTasksStuck      = metrics.TimerTasksStuck.Name()
	MetricOutboundTaskAttempts = metrics.OutboundTaskAttempts.Name()
	MetricOutboundTaskFailures = metrics.OutboundTaskFailures.Name()
	MetricOutboundTaskBacklog  = metrics.OutboundTaskBacklog.Name()
	MetricOutboundTasksStuck   = metrics.OutboundTasksStuck.Name()
	MetricTaskReadErrors       = metrics.TaskReadErrors.Name()
)

const metricTagQueue = metrics.TagQueue

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
