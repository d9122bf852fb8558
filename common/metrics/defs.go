package metrics

import "github.com/uber-go/tally/v4"

// Every declaration: NewXDef(name, help, tag keys...). The name is exported as vigil_<name>
// (plus _total for counters, _seconds for durations); the help is the HELP line; a metric's
// fixed label values, declared with WithValues, are exported at zero from the start. The
// docs/metrics.md's table is generated from these (make metrics-doc).

// The build.
var (
	// BuildInfo is 1, labelled with the running build (common/buildinfo), so that a dashboard
	// shows which version each host runs.
	BuildInfo = NewGaugeDef("build_info",
		"Always 1, labelled with the running build: its version, commit, build date and Go version.",
		TagVersion, TagCommit, TagBuildDate, TagGoVersion)
)

// Worker liveness.
var (
	// WorkerHeartbeats counts heartbeats applied to Worker executions.
	WorkerHeartbeats = NewCounterDef("worker_heartbeats",
		"Worker heartbeats applied to their Worker execution: written, or renewing the lease in memory within worker.heartbeatWriteInterval.")
	// WorkerHeartbeatLatency times a heartbeat from arrival at history to its answer.
	WorkerHeartbeatLatency = NewTimerDef("worker_heartbeat_latency",
		"Time from a worker heartbeat's arrival at history to its answer, admission's wait included; for a heartbeat that is written, up to its durable write.")
	// WorkerLeaseExpiries counts workers moved ACTIVE→INACTIVE because their lease ran out.
	WorkerLeaseExpiries = NewCounterDef("worker_lease_expiries",
		"Workers declared INACTIVE because their lease ran out without a heartbeat.")
	// WorkerResurrections counts INACTIVE workers brought back by a late heartbeat.
	WorkerResurrections = NewCounterDef("worker_resurrections",
		"INACTIVE workers made ACTIVE again by a late heartbeat.")
	// WorkerCleanups counts INACTIVE workers cleaned up after the cleanup delay.
	WorkerCleanups = NewCounterDef("worker_cleanups",
		"INACTIVE workers cleaned up (CLEANED_UP) after the cleanup delay.")
	// WorkerDeletions counts CLEANED_UP worker records deleted after their retention.
	WorkerDeletions = NewCounterDef("worker_deletions",
		"CLEANED_UP worker records deleted after their retention.")
	// WorkerShutdowns counts workers that announced their own shutdown.
	WorkerShutdowns = NewCounterDef("worker_shutdowns",
		"Workers that announced their own shutdown (ShutdownWorker).")
	// WorkersByState is the number of workers in each state, as a host total over its shards
	// (one writer per host; per-shard writers would overwrite each other).
	WorkersByState = NewGaugeDef("workers_by_state",
		"Workers on this host's shards in each liveness state, all namespaces together.", TagState).
		WithValues(TagState, "ACTIVE", "INACTIVE", "CLEANED_UP")
)

// Activity rescheduling after a worker is lost.
var (
	// ActivitiesRescheduled counts activities moved back to SCHEDULED because their worker was lost.
	ActivitiesRescheduled = NewCounterDef("activities_rescheduled",
		"Activities moved back to SCHEDULED because their worker was declared INACTIVE.")
	// ActivityRescheduleErrors counts activities that could not be rescheduled, by kind of failure.
	ActivityRescheduleErrors = NewCounterDef("activity_reschedule_errors",
		"Activities of a lost worker that could not be rescheduled, by gRPC code of the failure (kind); each is retried.", TagKind)
	// WorkerOrphansFound counts attempts a live worker's heartbeats showed it does not run
	// (orphan reconciliation), by why each was picked; each goes back to its shard.
	WorkerOrphansFound = NewCounterDef("worker_orphans_found",
		"Activity attempts a live worker's heartbeats showed it does not run (orphans), by why each was picked.", TagReason)
	// WorkerSuspicions counts connection suspicions by outcome: raised (every connection of an
	// ACTIVE worker closed without ShutdownWorker), cleared (it polled or heartbeat again),
	// confirmed (INACTIVE with reason CONNECTION_LOST).
	WorkerSuspicions = NewCounterDef("worker_suspicions",
		"Connection suspicions of workers by outcome: raised (every connection it polled or heartbeat on closed without ShutdownWorker), cleared (it polled or heartbeat again), confirmed (declared INACTIVE, reason CONNECTION_LOST).", TagOutcome).
		WithValues(TagOutcome, "raised", "cleared", "confirmed")
)

// Persistence.
var (
	// PersistenceRequests counts store calls.
	PersistenceRequests = NewCounterDef("persistence_requests",
		"Calls to the store (SQLite or PostgreSQL), by operation.", TagOperation)
	// PersistenceErrors counts store calls that failed.
	PersistenceErrors = NewCounterDef("persistence_errors",
		"Calls to the store that failed, by operation.", TagOperation)
	// PersistenceLatency times store calls.
	PersistenceLatency = NewTimerDef("persistence_latency",
		"Duration of calls to the store, by operation.", TagOperation)
	// GroupCommitBatchSize is the number of transactions written by one group commit.
	GroupCommitBatchSize = NewValueHistogramDef("group_commit_batch_size",
		"Transactions written together by one group commit of history's writes.", BatchSizeBuckets)
	// GroupCommitLatency times a group commit from the first queued transaction to the write.
	GroupCommitLatency = NewTimerDef("group_commit_latency",
		"Time from the first transaction queued for a group commit to its durable write.")
	// SQLiteWALFrames is the SQLite WAL's length, in frames (a 4 KiB page each).
	SQLiteWALFrames = NewGaugeDef("sqlite_wal_frames",
		"Frames (4 KiB pages) in the SQLite write-ahead log, as the background checkpointer last saw it.")
	// SQLiteWALBacklogFrames is the part of the WAL not yet copied into the database file.
	SQLiteWALBacklogFrames = NewGaugeDef("sqlite_wal_backlog_frames",
		"Frames of the SQLite write-ahead log not yet copied into the database file; one that keeps growing is a checkpointer outwritten by the writes.")
	// CorruptExecutions counts executions whose persisted state could not be loaded.
	CorruptExecutions = NewCounterDef("corrupt_executions",
		"Executions whose persisted state could not be loaded (their tasks are parked).")
	// ExecutionCacheDecodes counts cached executions decoded again because they had been
	// kept encoded (history.executionCacheDecodedSize): one per transaction that missed the
	// decoded set. Near the rate of heartbeats, the set is too small for the shard's workers.
	ExecutionCacheDecodes = NewCounterDef("execution_cache_decodes",
		"Cached executions decoded again for a transaction because they were kept encoded (a miss on the decoded set, history.executionCacheDecodedSize).")
)

// Cluster: membership, shard ownership and routing between hosts.
var (
	// ClusterHostsAlive is the number of live hosts this host sees in the membership.
	ClusterHostsAlive = NewGaugeDef("cluster_hosts_alive",
		"Live hosts this host sees in the cluster membership, itself included.")
	// ShardsOwned is the number of shards this host serves.
	ShardsOwned = NewGaugeDef("shards_owned",
		"History shards this host owns and serves.")
	// ShardAcquisitions counts shards this host took (its range_id bumped).
	ShardAcquisitions = NewCounterDef("shard_acquisitions",
		"Shards this host acquired (bumping their range_id).")
	// ShardReleases counts shards this host handed off cleanly (graceful stop or rebalance).
	ShardReleases = NewCounterDef("shard_releases",
		"Shards this host released cleanly (graceful stop or rebalance).")
	// ShardLosses counts shards this host lost without releasing them: fenced by a newer
	// owner's range_id, or dropped because its own membership lapsed.
	ShardLosses = NewCounterDef("shard_losses",
		"Shards this host lost without releasing them: fenced by a newer owner, or dropped when its membership lapsed.")
	// ShardHandoffLatency times a shard's move to this host, from the membership change that
	// gave it the shard to its acquisition.
	ShardHandoffLatency = NewTimerDef("shard_handoff_latency",
		"Time from the membership change that gave this host a shard to the shard's acquisition.")
	// HistoryRequestsForwarded counts history calls sent to another host.
	HistoryRequestsForwarded = NewCounterDef("history_requests_forwarded",
		"History calls forwarded to the host that owns their shard.")
	// HistoryRequestsRerouted counts history calls retried because their shard was moving.
	HistoryRequestsRerouted = NewCounterDef("history_requests_rerouted",
		"History calls retried on another host because their shard was moving.")
	// HistoryRequestsRelayed counts history calls relayed through a third host to an owner
	// this host could not reach, by outcome.
	HistoryRequestsRelayed = NewCounterDef("history_requests_relayed",
		"History calls sent through a third host because their shard's owner renews but did not answer this host; outcome: answered (by the owner, through the relay) or failed.",
		TagOutcome)
)

// Task queues. Each queue's scope is tagged queue=timer or queue=outbound; its gauges are per
// shard as well (a handful of shards: a host total would need one writer per host).
var (
	// TimerTasksFired counts timer tasks handed to their executor.
	TimerTasksFired = NewCounterDef("timer_tasks_fired",
		"Timer tasks handed to their executor.", TagQueue).WithValues(TagQueue, "timer")
	// TimerTaskLag times how late a timer task fires: fire time minus scheduled time.
	TimerTaskLag = NewTimerDef("timer_task_lag",
		"How late timer tasks fire: fire time minus scheduled time.", TagQueue).WithValues(TagQueue, "timer")
	// TimerTaskFailures counts failed executions of timer tasks (each will be retried). History
	// counts the same failures by task type as task_errors.
	TimerTaskFailures = NewCounterDef("timer_task_failures",
		"Failed executions of timer tasks (each is retried).", TagQueue).WithValues(TagQueue, "timer")
	// TimerTasksDeferred counts timer tasks that declined to run and asked to be offered
	// again later (the expiry brake's held lease expiries, and expiry timers waiting for a
	// lease that heartbeats answered from memory extended).
	TimerTasksDeferred = NewCounterDef("timer_tasks_deferred",
		"Timer tasks that declined to run and will be offered again (lease expiries held by the expiry brake, or waiting for a lease that unwritten heartbeats extended).", TagQueue).
		WithValues(TagQueue, "timer")
	// TimerTasksSuperseded counts timer tasks skipped because a later one replaced them.
	TimerTasksSuperseded = NewCounterDef("timer_tasks_superseded",
		"Timer tasks skipped because a later one replaced them.", TagQueue).WithValues(TagQueue, "timer")
	// TimerQueueInMemory is the number of timer tasks a shard holds in memory.
	TimerQueueInMemory = NewGaugeDef("timer_queue_in_memory",
		"Timer tasks a shard holds in memory.", TagQueue, TagShard)
	// TimerTasksStuck is the number of a shard's timer tasks that keep failing.
	TimerTasksStuck = NewGaugeDef("timer_tasks_stuck",
		"A shard's timer tasks that keep failing.", TagQueue, TagShard)
	// TasksParked counts tasks set aside (unknown type, corrupt execution) until a restart.
	TasksParked = NewCounterDef("tasks_parked",
		"Tasks set aside until a restart (unknown type, corrupt execution).", TagQueue).
		WithValues(TagQueue, "timer", "outbound")
	// TaskReadErrors counts failed reads of a task queue from the store.
	TaskReadErrors = NewCounterDef("task_read_errors",
		"Failed reads of a shard's task queue from the store.", TagQueue).WithValues(TagQueue, "timer", "outbound")
	// OutboundTaskAttempts counts attempts to execute outbound (side-effect) tasks.
	OutboundTaskAttempts = NewCounterDef("outbound_task_attempts",
		"Attempts to execute outbound (side-effect) tasks.", TagQueue).WithValues(TagQueue, "outbound")
	// OutboundTaskFailures counts failed attempts of outbound tasks (each will be retried).
	OutboundTaskFailures = NewCounterDef("outbound_task_failures",
		"Failed attempts of outbound tasks (each is retried).", TagQueue).WithValues(TagQueue, "outbound")
	// OutboundTaskBacklog is the number of a shard's outbound tasks waiting.
	OutboundTaskBacklog = NewGaugeDef("outbound_task_backlog",
		"A shard's outbound tasks waiting to run.", TagQueue, TagShard)
	// OutboundTasksStuck is the number of a shard's outbound tasks that keep failing.
	OutboundTasksStuck = NewGaugeDef("outbound_tasks_stuck",
		"A shard's outbound tasks that keep failing.", TagQueue, TagShard)
	// StaleTasksPruned counts tasks dropped because their validator found them obsolete.
	StaleTasksPruned = NewCounterDef("stale_tasks_pruned",
		"Tasks dropped because their validator found them obsolete, by task type.", TagTaskType)
	// TaskErrors counts task executions that returned an error, by task type.
	TaskErrors = NewCounterDef("task_errors",
		"Task executions that returned an error, by task type (each is retried).", TagTaskType)
)

// Configuration.
var (
	// DynamicConfigReloadErrors counts dynamic config reloads rejected (previous values kept).
	DynamicConfigReloadErrors = NewCounterDef("dynamicconfig_reload_errors",
		"Dynamic config reloads rejected; the previous values stay in force.")
)

// LongPollOperations are the RPCs held open until there is something to answer. They count in
// rpc_requests, but their wait is in long_poll_latency, not rpc_latency, and their ends
// (empty answer, cancelled by the client or its deadline) in long_poll_ends, not rpc_errors.
var LongPollOperations = []string{"PollActivityTaskQueue", "PollWorkflowTaskQueue", "PollNexusTaskQueue", "PollActivityExecution"}

// Long-poll ends (long_poll_ends' kind).
const (
	// LongPollAnswered: the poll returned a task or a result.
	LongPollAnswered = "answered"
	// LongPollEmpty: the poll's wait ran out and it returned empty.
	LongPollEmpty = "empty"
	// LongPollCanceled: the client cancelled the poll or its deadline passed.
	LongPollCanceled = "canceled"
)

// RPC.
var (
	// RPCRequests counts RPCs received.
	RPCRequests = NewCounterDef("rpc_requests",
		"RPCs received by the frontend, long polls included, by operation.", TagOperation)
	// RPCErrors counts RPCs that returned an error, by gRPC code.
	RPCErrors = NewCounterDef("rpc_errors",
		"RPCs that returned an error, by operation and gRPC code; a long poll's empty or cancelled end is not one.", TagOperation, TagCode)
	// RPCLatency times RPCs from receipt to response.
	RPCLatency = NewTimerDef("rpc_latency",
		"Duration of RPCs from receipt to response, by operation; long polls are in long_poll_latency.", TagOperation)
	// LongPollLatency times long polls, from receipt to their answer or cancellation.
	LongPollLatency = NewTimerDef("long_poll_latency",
		"Time long polls were held, from receipt to their answer, empty end or cancellation, by operation.", TagOperation).
		WithValues(TagOperation, LongPollOperations...)
	// LongPollEnds counts long polls that ended without an error, by how.
	LongPollEnds = NewCounterDef("long_poll_ends",
		"Long polls that ended without an error, by operation and how (kind): answered, empty (their wait ran out), "+
			"canceled (by the client, or its deadline passed).", TagOperation, TagKind).
		WithValues(TagOperation, LongPollOperations...).
		WithValues(TagKind, LongPollAnswered, LongPollEmpty, LongPollCanceled)
)

// Security.
var (
	// AuthDenials counts calls refused by authentication or authorization, by reason
	// (unauthenticated, permission_denied, worker_owner).
	AuthDenials = NewCounterDef("auth_denials",
		"Calls refused by authentication or authorization, by operation and reason (unauthenticated, permission_denied, worker_owner).",
		TagOperation, TagKind)
	// AuthAdminActions counts admin calls (API keys, drain) that were allowed.
	AuthAdminActions = NewCounterDef("auth_admin_actions",
		"Admin calls (API keys, drain) that were allowed, by operation.", TagOperation)
	// AbuseLimited counts calls refused by an abuse limit, by limit (principal_rps,
	// long_polls, registration_rps, max_workers).
	AbuseLimited = NewCounterDef("abuse_limited",
		"Calls refused by an abuse limit, by limit (kind).", TagKind).
		WithValues(TagKind, "principal_rps", "long_polls", "registration_rps", "max_workers")
	// TaskTokensRefused counts task tokens refused because their signature or fields did not
	// match.
	TaskTokensRefused = NewCounterDef("task_tokens_refused",
		"Task tokens refused because their signature or fields did not match.")
)

// Admission control and the expiry brake (history).
var (
	// AdmissionShed counts calls refused at once with ResourceExhausted, by class (kind).
	AdmissionShed = NewCounterDef("admission_shed",
		"History calls refused at once with ResourceExhausted by admission control, by class (kind).", TagKind).
		WithValues(TagKind, "heartbeat", "registration", "read")
	// AdmissionDropped counts calls dropped unserved because their caller's deadline passed.
	AdmissionDropped = NewCounterDef("admission_dropped",
		"History calls dropped unserved because their caller's deadline passed, by class (kind).", TagKind).
		WithValues(TagKind, "heartbeat", "registration", "read")
	// AdmissionQueued is the number of calls waiting for a slot, host-wide.
	AdmissionQueued = NewGaugeDef("admission_queued",
		"History calls waiting for an admission slot on this host.")
	// AdmissionQueuedBytes is the payload bytes of the calls waiting for a slot, host-wide.
	AdmissionQueuedBytes = NewGaugeDef("admission_queued_bytes",
		"Payload bytes of the history calls waiting for an admission slot on this host.")
	// AdmissionInFlightLimit is the adaptive limit of calls history serves at once per shard.
	AdmissionInFlightLimit = NewGaugeDef("admission_in_flight_limit",
		"Calls history serves at once per shard: the adaptive limit (AIMD on write latency, between history.admissionMinInFlightPerShard and history.admissionMaxInFlightPerShard).")
	// AdmissionQueueDelay times how long an admitted call waited, by class (kind).
	AdmissionQueueDelay = NewTimerDef("admission_queue_delay",
		"Time admitted history calls waited for their slot, by class (kind).", TagKind).
		WithValues(TagKind, "heartbeat", "registration", "read")
	// OutboundYieldDelay times how long an outbound queue held its deliveries for the calls
	// waiting for admission (history.outboundYieldMax).
	OutboundYieldDelay = NewTimerDef("outbound_yield_delay",
		"Time a shard's outbound queue held its background deliveries (a stopped or dead worker's activities handed back) while heartbeats or registrations waited for admission.")
	// ExpiryBrakeEngaged is 1 while the expiry brake holds lease expiries back, by reason (kind)
	// and namespace ("" for the host-wide reason).
	ExpiryBrakeEngaged = NewGaugeDef("worker_expiry_brake_engaged",
		"1 while the expiry brake holds lease expiries back, by reason (kind) and namespace (empty for the host-wide reason).",
		TagKind, TagNamespace)
	// LeaseExpiriesDeferred counts lease expiries the brake held back (each recheck counts).
	LeaseExpiriesDeferred = NewCounterDef("worker_lease_expiries_deferred",
		"Lease expiries the expiry brake held back, by reason (kind); each recheck counts.", TagKind).
		WithValues(TagKind, "server_behind", "mass_expiry")
)

// Early refusal (frontend): heartbeats refused in the transport while history is behind.
var (
	// EarlyRefusals counts heartbeats refused before they were read.
	EarlyRefusals = NewCounterDef("early_refusals",
		"Heartbeats refused with ResourceExhausted in the transport, before they were read, while history's queue or the heartbeats on their way to it would have kept them waiting longer than frontend.earlyRefusalTargetWait (a share, growing with the excess), or past their own deadline.")
	// HeartbeatsOutstanding is the heartbeats let through the tap and not yet answered.
	HeartbeatsOutstanding = NewGaugeDef("heartbeats_outstanding",
		"Heartbeats the frontend let through its early refusal and has not answered yet: being read, decoded, authorized, queued in history or served. Early refusal counts them in the wait a new heartbeat would meet.")
	// GCPercent is the GOGC the process runs with (common/gcpacer).
	GCPercent = NewGaugeDef("gc_percent",
		"The Go collector's GOGC the process runs with: raised from its base while the host allocates fast, so that cycles come about system.gcTargetInterval apart (common/gcpacer).")
)

// Live view (WatchWorkers and the web page's stream).
var (
	// WatchersOpen is the number of open watch streams (gRPC and web page).
	WatchersOpen = NewGaugeDef("watchers_open",
		"Open live-view streams (WatchWorkers and the web page).")
	// WatchEventsSent counts events sent to watchers.
	WatchEventsSent = NewCounterDef("watch_events_sent",
		"Worker change events sent to live-view streams.")
	// WatchResyncs counts resyncs: a cursor the server no longer holds, or a watcher that fell
	// behind its buffer.
	WatchResyncs = NewCounterDef("watch_resyncs",
		"Live-view resyncs: a cursor the server no longer holds, or a watcher that fell behind its buffer.")
)

// BatchSizeBuckets suit batch sizes: 1 to 4096, doubling.
var BatchSizeBuckets = tally.MustMakeExponentialValueBuckets(1, 2, 13)
