package metrics

import "github.com/uber-go/tally/v4"

// Worker liveness.
var (
	// WorkerHeartbeats counts heartbeats applied to Worker executions.
	WorkerHeartbeats = NewCounterDef("worker_heartbeats")
	// WorkerHeartbeatLatency times a heartbeat from arrival at history to the durable write.
	WorkerHeartbeatLatency = NewTimerDef("worker_heartbeat_latency")
	// WorkerLeaseExpiries counts workers moved ACTIVE→INACTIVE because their lease ran out.
	WorkerLeaseExpiries = NewCounterDef("worker_lease_expiries")
	// WorkerResurrections counts INACTIVE workers brought back by a late heartbeat.
	WorkerResurrections = NewCounterDef("worker_resurrections")
	// WorkerCleanups counts INACTIVE workers cleaned up after the cleanup delay.
	WorkerCleanups = NewCounterDef("worker_cleanups")
	// WorkerDeletions counts CLEANED_UP worker records deleted after their retention.
	WorkerDeletions = NewCounterDef("worker_deletions")
	// WorkerShutdowns counts workers that announced their own shutdown.
	WorkerShutdowns = NewCounterDef("worker_shutdowns")
	// WorkersByState is the number of workers in each state, as a host total over its shards
	// (one writer per host; per-shard writers would overwrite each other).
	WorkersByState = NewGaugeDef("workers_by_state", TagState)
)

// Activity rescheduling after a worker is lost.
var (
	// ActivitiesRescheduled counts activities moved back to SCHEDULED because their worker was lost.
	ActivitiesRescheduled = NewCounterDef("activities_rescheduled")
	// ActivityRescheduleErrors counts activities that could not be rescheduled, by kind of failure.
	ActivityRescheduleErrors = NewCounterDef("activity_reschedule_errors", TagKind)
)

// Persistence.
var (
	// PersistenceRequests counts store calls.
	PersistenceRequests = NewCounterDef("persistence_requests", TagOperation)
	// PersistenceErrors counts store calls that failed.
	PersistenceErrors = NewCounterDef("persistence_errors", TagOperation)
	// PersistenceLatency times store calls.
	PersistenceLatency = NewTimerDef("persistence_latency", TagOperation)
	// GroupCommitBatchSize is the number of transactions written by one group commit.
	GroupCommitBatchSize = NewValueHistogramDef("group_commit_batch_size", BatchSizeBuckets)
	// GroupCommitLatency times a group commit from the first queued transaction to the write.
	GroupCommitLatency = NewTimerDef("group_commit_latency")
	// CorruptExecutions counts executions whose persisted state could not be loaded.
	CorruptExecutions = NewCounterDef("corrupt_executions")
)

// Task queues.
var (
	// TimerTaskLag times how late a timer task fires: fire time minus scheduled time.
	TimerTaskLag = NewTimerDef("timer_task_lag", TagTaskType)
	// TimerTasksFired counts timer tasks handed to their executor.
	TimerTasksFired = NewCounterDef("timer_tasks_fired", TagTaskType)
	// StaleTasksPruned counts tasks dropped because their validator found them obsolete.
	StaleTasksPruned = NewCounterDef("stale_tasks_pruned", TagTaskType)
	// TaskErrors counts task executions that returned an error.
	TaskErrors = NewCounterDef("task_errors", TagTaskType)
	// OutboundTaskAttempts counts attempts to execute outbound (side-effect) tasks.
	OutboundTaskAttempts = NewCounterDef("outbound_task_attempts", TagTaskType)
	// OutboundTaskFailures counts failed attempts of outbound tasks (each will be retried).
	OutboundTaskFailures = NewCounterDef("outbound_task_failures", TagTaskType)
	// OutboundTaskBacklog is the number of outbound tasks waiting, as a host total.
	OutboundTaskBacklog = NewGaugeDef("outbound_task_backlog")
)

// Configuration.
var (
	// DynamicConfigReloadErrors counts dynamic config reloads rejected (previous values kept).
	DynamicConfigReloadErrors = NewCounterDef("dynamicconfig_reload_errors")
)

// RPC.
var (
	// RPCRequests counts RPCs received.
	RPCRequests = NewCounterDef("rpc_requests", TagOperation)
	// RPCErrors counts RPCs that returned an error, by gRPC code.
	RPCErrors = NewCounterDef("rpc_errors", TagOperation, TagCode)
	// RPCLatency times RPCs from receipt to response.
	RPCLatency = NewTimerDef("rpc_latency", TagOperation)
)

// Admission control and the expiry brake (history).
var (
	// AdmissionShed counts calls refused at once with ResourceExhausted, by class (kind).
	AdmissionShed = NewCounterDef("admission_shed", TagKind)
	// AdmissionDropped counts calls dropped unserved because their caller's deadline passed.
	AdmissionDropped = NewCounterDef("admission_dropped", TagKind)
	// AdmissionQueued is the number of calls waiting for a slot, host-wide.
	AdmissionQueued = NewGaugeDef("admission_queued")
	// AdmissionQueuedBytes is the payload bytes of the calls waiting for a slot, host-wide.
	AdmissionQueuedBytes = NewGaugeDef("admission_queued_bytes")
	// AdmissionQueueDelay times how long an admitted call waited, by class (kind).
	AdmissionQueueDelay = NewTimerDef("admission_queue_delay", TagKind)
	// ExpiryBrakeEngaged is 1 while the expiry brake holds lease expiries back, by reason (kind)
	// and namespace ("" for the host-wide reason).
	ExpiryBrakeEngaged = NewGaugeDef("worker_expiry_brake_engaged", TagKind, TagNamespace)
	// LeaseExpiriesDeferred counts lease expiries the brake held back (each recheck counts).
	LeaseExpiriesDeferred = NewCounterDef("worker_lease_expiries_deferred", TagKind)
)

// BatchSizeBuckets suit batch sizes: 1 to 4096, doubling.
var BatchSizeBuckets = tally.MustMakeExponentialValueBuckets(1, 2, 13)

// All lists every definition above; tests use it to check names are unique and tags are known.
var All = []interface {
	Name() string
	Tags() []string
}{
	WorkerHeartbeats, WorkerHeartbeatLatency, WorkerLeaseExpiries, WorkerResurrections,
	WorkerCleanups, WorkerDeletions, WorkerShutdowns, WorkersByState,
	ActivitiesRescheduled, ActivityRescheduleErrors,
	PersistenceRequests, PersistenceErrors, PersistenceLatency, GroupCommitBatchSize,
	GroupCommitLatency, CorruptExecutions,
	TimerTaskLag, TimerTasksFired, StaleTasksPruned, TaskErrors,
	OutboundTaskAttempts, OutboundTaskFailures, OutboundTaskBacklog,
	DynamicConfigReloadErrors,
	RPCRequests, RPCErrors, RPCLatency,
	AdmissionShed, AdmissionDropped, AdmissionQueued, AdmissionQueuedBytes, AdmissionQueueDelay,
	ExpiryBrakeEngaged, LeaseExpiriesDeferred,
}
