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
	// WorkerOrphansFound counts attempts a live worker's heartbeats showed it does not run
	// (orphan reconciliation), by why each was picked; each goes back to its shard.
	WorkerOrphansFound = NewCounterDef("worker_orphans_found", TagReason)
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

// Cluster: membership, shard ownership and routing between hosts.
var (
	// ClusterHostsAlive is the number of live hosts this host sees in the membership.
	ClusterHostsAlive = NewGaugeDef("cluster_hosts_alive")
	// ShardsOwned is the number of shards this host serves.
	ShardsOwned = NewGaugeDef("shards_owned")
	// ShardAcquisitions counts shards this host took (its range_id bumped).
	ShardAcquisitions = NewCounterDef("shard_acquisitions")
	// ShardReleases counts shards this host handed off cleanly (graceful stop or rebalance).
	ShardReleases = NewCounterDef("shard_releases")
	// ShardLosses counts shards this host lost without releasing them: fenced by a newer
	// owner's range_id, or dropped because its own membership lapsed.
	ShardLosses = NewCounterDef("shard_losses")
	// ShardHandoffLatency times a shard's move to this host, from the membership change that
	// gave it the shard to its acquisition.
	ShardHandoffLatency = NewTimerDef("shard_handoff_latency")
	// HistoryRequestsForwarded counts history calls sent to another host.
	HistoryRequestsForwarded = NewCounterDef("history_requests_forwarded")
	// HistoryRequestsRerouted counts history calls retried because their shard was moving.
	HistoryRequestsRerouted = NewCounterDef("history_requests_rerouted")
)

// Task queues. Each queue's scope is tagged queue=timer or queue=outbound; its gauges are per
// shard as well (a handful of shards: a host total would need one writer per host).
var (
	// TimerTasksFired counts timer tasks handed to their executor.
	TimerTasksFired = NewCounterDef("timer_tasks_fired", TagQueue)
	// TimerTaskLag times how late a timer task fires: fire time minus scheduled time.
	TimerTaskLag = NewTimerDef("timer_task_lag", TagQueue)
	// TimerTaskFailures counts failed executions of timer tasks (each will be retried). History
	// counts the same failures by task type as task_errors.
	TimerTaskFailures = NewCounterDef("timer_task_failures", TagQueue)
	// TimerTasksDeferred counts timer tasks that declined to run and asked to be offered
	// again later (the expiry brake's held lease expiries).
	TimerTasksDeferred = NewCounterDef("timer_tasks_deferred", TagQueue)
	// TimerTasksSuperseded counts timer tasks skipped because a later one replaced them.
	TimerTasksSuperseded = NewCounterDef("timer_tasks_superseded", TagQueue)
	// TimerQueueInMemory is the number of timer tasks a shard holds in memory.
	TimerQueueInMemory = NewGaugeDef("timer_queue_in_memory", TagQueue, TagShard)
	// TimerTasksStuck is the number of a shard's timer tasks that keep failing.
	TimerTasksStuck = NewGaugeDef("timer_tasks_stuck", TagQueue, TagShard)
	// TasksParked counts tasks set aside (unknown type, corrupt execution) until a restart.
	TasksParked = NewCounterDef("tasks_parked", TagQueue)
	// TaskReadErrors counts failed reads of a task queue from the store.
	TaskReadErrors = NewCounterDef("task_read_errors", TagQueue)
	// OutboundTaskAttempts counts attempts to execute outbound (side-effect) tasks.
	OutboundTaskAttempts = NewCounterDef("outbound_task_attempts", TagQueue)
	// OutboundTaskFailures counts failed attempts of outbound tasks (each will be retried).
	OutboundTaskFailures = NewCounterDef("outbound_task_failures", TagQueue)
	// OutboundTaskBacklog is the number of a shard's outbound tasks waiting.
	OutboundTaskBacklog = NewGaugeDef("outbound_task_backlog", TagQueue, TagShard)
	// OutboundTasksStuck is the number of a shard's outbound tasks that keep failing.
	OutboundTasksStuck = NewGaugeDef("outbound_tasks_stuck", TagQueue, TagShard)
	// StaleTasksPruned counts tasks dropped because their validator found them obsolete.
	StaleTasksPruned = NewCounterDef("stale_tasks_pruned", TagTaskType)
	// TaskErrors counts task executions that returned an error, by task type.
	TaskErrors = NewCounterDef("task_errors", TagTaskType)
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

// Security.
var (
	// AuthDenials counts calls refused by authentication or authorization, by reason
	// (unauthenticated, permission_denied, worker_owner).
	AuthDenials = NewCounterDef("auth_denials", TagOperation, TagKind)
	// AuthAdminActions counts admin calls (API keys, drain) that were allowed.
	AuthAdminActions = NewCounterDef("auth_admin_actions", TagOperation)
	// AbuseLimited counts calls refused by an abuse limit, by limit (principal_rps,
	// long_polls, registration_rps).
	AbuseLimited = NewCounterDef("abuse_limited", TagKind)
	// TaskTokensRefused counts task tokens refused because their signature or fields did not
	// match.
	TaskTokensRefused = NewCounterDef("task_tokens_refused")
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
	// AdmissionInFlightLimit is the adaptive limit of calls history serves at once per shard.
	AdmissionInFlightLimit = NewGaugeDef("admission_in_flight_limit")
	// AdmissionQueueDelay times how long an admitted call waited, by class (kind).
	AdmissionQueueDelay = NewTimerDef("admission_queue_delay", TagKind)
	// ExpiryBrakeEngaged is 1 while the expiry brake holds lease expiries back, by reason (kind)
	// and namespace ("" for the host-wide reason).
	ExpiryBrakeEngaged = NewGaugeDef("worker_expiry_brake_engaged", TagKind, TagNamespace)
	// LeaseExpiriesDeferred counts lease expiries the brake held back (each recheck counts).
	LeaseExpiriesDeferred = NewCounterDef("worker_lease_expiries_deferred", TagKind)
)

// Live view (WatchWorkers and the web page's stream).
var (
	// WatchersOpen is the number of open watch streams (gRPC and web page).
	WatchersOpen = NewGaugeDef("watchers_open")
	// WatchEventsSent counts events sent to watchers.
	WatchEventsSent = NewCounterDef("watch_events_sent")
	// WatchResyncs counts resyncs: a cursor the server no longer holds, or a watcher that fell
	// behind its buffer.
	WatchResyncs = NewCounterDef("watch_resyncs")
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
	ActivitiesRescheduled, ActivityRescheduleErrors, WorkerOrphansFound,
	PersistenceRequests, PersistenceErrors, PersistenceLatency, GroupCommitBatchSize,
	GroupCommitLatency, CorruptExecutions,
	ClusterHostsAlive, ShardsOwned, ShardAcquisitions, ShardReleases, ShardLosses, ShardHandoffLatency,
	HistoryRequestsForwarded, HistoryRequestsRerouted,
	TimerTasksFired, TimerTaskLag, TimerTaskFailures, TimerTasksDeferred, TimerTasksSuperseded, TimerQueueInMemory,
	TimerTasksStuck, TasksParked, TaskReadErrors, OutboundTaskAttempts, OutboundTaskFailures,
	OutboundTaskBacklog, OutboundTasksStuck, StaleTasksPruned, TaskErrors,
	DynamicConfigReloadErrors,
	RPCRequests, RPCErrors, RPCLatency,
	AuthDenials, AuthAdminActions, AbuseLimited, TaskTokensRefused,
	AdmissionShed, AdmissionDropped, AdmissionQueued, AdmissionQueuedBytes, AdmissionQueueDelay,
	AdmissionInFlightLimit,
	ExpiryBrakeEngaged, LeaseExpiriesDeferred,
	WatchersOpen, WatchEventsSent, WatchResyncs,
}
