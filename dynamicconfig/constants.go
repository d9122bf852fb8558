package dynamicconfig

import "time"

// Every dynamic config setting of vigil, in one place. Namespace settings are read with the
// namespace NAME.

// Worker liveness.
var (
	InactiveWorkerCleanupDelay = NewNamespaceDurationSetting(
		"matching.InactiveWorkerCleanupDelay",
		60*time.Minute,
		`How long a worker stays INACTIVE (lease expired, no heartbeat) before it is cleaned up
and forgotten. A heartbeat within this delay resurrects it.`,
	)
	DefaultLeaseDuration = NewNamespaceDurationSetting(
		"worker.defaultLeaseDuration",
		30*time.Second,
		`Lease granted to a worker that does not ask for one. The worker is declared lost when a
lease passes without a heartbeat.`,
	)
	MinLeaseDuration = NewNamespaceDurationSetting(
		"worker.minLeaseDuration",
		time.Second,
		`Shortest lease a worker may ask for.`,
	)
	MaxLeaseDuration = NewNamespaceDurationSetting(
		"worker.maxLeaseDuration",
		10*time.Minute,
		`Longest lease a worker may ask for.`,
	)
	LeaseIntervalMultiplier = NewNamespaceFloatSetting(
		"worker.leaseIntervalMultiplier",
		3,
		`For SDK workers, which request no lease: the lease is this multiple of the interval the
worker reports between its heartbeats (elapsed_since_last_heartbeat), within the lease bounds.
A worker that misses this many heartbeats in a row is declared INACTIVE.`,
	)
	CleanedUpWorkerRetention = NewNamespaceDurationSetting(
		"worker.cleanedUpRetention",
		24*time.Hour,
		`How long the record of a CLEANED_UP worker is kept before it is deleted. While it is
kept, DescribeWorker still answers and a heartbeat with the same WorkerInstanceKey is refused
(restart with a new key); once deleted, the key is unknown and a heartbeat registers it anew.`,
	)
	StateGaugeInterval = NewGlobalDurationSetting(
		"worker.stateGaugeInterval",
		15*time.Second,
		`How often workers_by_state is recounted from the store.`,
	)
	MaxBindingsPerWorker = NewNamespaceIntSetting(
		"worker.maxBindingsPerWorker",
		100000,
		`Most activities one worker may have bound (started and not yet completed) at a time.`,
	)
	LeaseExpiryGraceAfterRestart = NewGlobalDurationSetting(
		"history.leaseExpiryGraceAfterRestart",
		30*time.Second,
		`After a shard is (re)loaded, leases that expired while no host owned it get this much
extra time, so that workers can reach the new owner before being declared lost.`,
	)
)

// History engine and task queues.
var (
	GroupCommitMaxBatchSize = NewGlobalIntSetting(
		"history.groupCommitMaxBatchSize",
		256,
		`Most transactions written together by one group commit.`,
	)
	GroupCommitMaxWait = NewGlobalDurationSetting(
		"history.groupCommitMaxWait",
		0,
		`Longest a transaction waits for others to join its group commit. The default, 0, adds no
latency: writes that arrive while a batch commits form the next batch, which is where batching
comes from under load. A small wait (say 1ms) can enlarge batches on a slow disk.`,
	)
	TimerLookAheadDuration = NewGlobalDurationSetting(
		"history.timerLookAheadDuration",
		time.Minute,
		`How far ahead of now the timer queue reads tasks into memory. Longer means fewer reads and
more memory; a task due later than this is read by a later look-ahead.`,
	)
	TimerLookAheadPageSize = NewGlobalIntSetting(
		"history.timerLookAheadPageSize",
		1000,
		`Most timer tasks read by one look-ahead query.`,
	)
	OutboundMaxAttemptsBeforeAlert = NewGlobalIntSetting(
		"history.outboundMaxAttemptsBeforeAlert",
		20,
		`Attempts after which a failing outbound task is logged as an error (it keeps retrying).`,
	)
	OutboundRetryInitialInterval = NewGlobalDurationSetting(
		"history.outboundRetryInitialInterval",
		100*time.Millisecond,
		`Delay before the first retry of a failed outbound task; doubles on each attempt.`,
	)
	OutboundRetryMaxInterval = NewGlobalDurationSetting(
		"history.outboundRetryMaxInterval",
		30*time.Second,
		`Longest delay between retries of a failed outbound task.`,
	)
)

// Frontend.
var (
	NamespaceRPS = NewNamespaceFloatSetting(
		"frontend.namespaceRPS",
		10000,
		`Requests per second the frontend accepts for one namespace.`,
	)
	BlobSizeLimitWarn = NewNamespaceIntSetting(
		"limit.blobSize.warn",
		512*1024,
		`Bytes of one payload (activity input, result, failure, heartbeat details) above which
the frontend logs a warning.`,
	)
	BlobSizeLimitError = NewNamespaceIntSetting(
		"limit.blobSize.error",
		2*1024*1024,
		`Bytes of one payload above which the frontend refuses it: a start is InvalidArgument; an
oversize result or heartbeat fails the activity, as Temporal does; an oversize failure is
replaced by a ServerFailure saying so.`,
	)
	PrincipalRPS = NewNamespaceFloatSetting(
		"frontend.principalRPS",
		0,
		`Requests per second one authenticated principal may make in a namespace, besides
frontend.namespaceRPS, so one client cannot starve the others. Long polls and worker
heartbeats (RecordWorkerHeartbeat, ShutdownWorker, liveness RecordHeartbeat) are exempt: a
fleet sharing a key must never lose its leases to it. 0 or less (the default): no limit, as a
fleet sharing one key is one principal; set it where each client has its own key. Applies
only when auth is on.`,
	)
	MaxConcurrentLongPolls = NewNamespaceIntSetting(
		"frontend.maxConcurrentLongPolls",
		25000,
		`Long polls a frontend holds open at once for one namespace; more are refused with
ResourceExhausted (the SDK backs off and polls again). An SDK worker holds about five (two
activity, two workflow, one worker-command poll), so the default fits some 5,000 workers per
frontend. 0 or less: no limit.`,
	)
	WorkerRegistrationRPS = NewNamespaceFloatSetting(
		"worker.registrationRPS",
		1000,
		`New worker instance keys per second a history host registers for one namespace, against
crash-looping fleets that mint a new key on each start. Heartbeats of known workers are not
limited. 0 or less: no limit.`,
	)
	NamespaceRegistrationRPS = NewNamespaceFloatSetting(
		"frontend.namespaceRegistrationRPS",
		1000,
		`Heartbeats per second that create a new worker, per namespace. Limits
the cost of a fleet restarting at once without slowing heartbeats of known workers.`,
	)
)
