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
		3*time.Minute,
		`Lease granted to a worker that does not ask for one and reports no interval yet (an SDK
worker's first heartbeat). The worker is declared lost when a lease passes without a heartbeat.
It must outlast the longest interval an SDK may use (60 s, also the Go SDK's default) with the
same margin as later beats get (worker.leaseIntervalMultiplier), or a worker left at the SDK's
defaults would lose its first lease before its second beat.`,
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
		time.Second,
		`How often workers_by_state, and the counts the expiry brake and worker.maxWorkersPerNamespace
read, are reported from the counts kept as workers change state (no store read).`,
	)
	StateRecountInterval = NewGlobalDurationSetting(
		"worker.stateRecountInterval",
		2*time.Minute,
		`How often the workers counted by state are recounted from the store (also at start). Between
recounts a host counts the state changes it commits; the recount takes in those committed on
other hosts of a cluster, or before a restart.`,
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
	GroupCommitSiblingsWait = NewGlobalDurationSetting(
		"history.groupCommitSiblingsWait",
		4*time.Millisecond,
		`Longest a group commit waits, after its oldest write arrived, for the writes of calls
already admitted and still running (PostgreSQL's commit_delay with commit_siblings). It waits
only while such calls exist, and commits as soon as they have all handed in their writes: an
idle server adds nothing, and a loaded one commits many heartbeats at once instead of a few,
paying the WAL's pages and the fsync once per batch. 0: off.`,
	)
	GroupCommitRateWait = NewGlobalDurationSetting(
		"history.groupCommitRateWait",
		10*time.Millisecond,
		`Longest a group commit waits for history.groupCommitRateBatchSize transactions when the
recent rate of writes brings at least two more within this time. At a few hundred writes a
second (a large fleet with a long heartbeat interval) commits otherwise carry two or three
writes each and pay a commit's fixed cost (the transaction, the WAL header, the fsync) for them.
Below that rate nothing waits; above it, commits fill up while the previous one runs. 0: off.`,
	)
	GroupCommitRateBatchSize = NewGlobalIntSetting(
		"history.groupCommitRateBatchSize",
		16,
		`The batch history.groupCommitRateWait waits for. At moderate rates the wait's limit ends it
first; at a few thousand writes a second a larger batch would add latency for little CPU.`,
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
		`Requests per second the frontend accepts for one namespace. Worker heartbeats,
ShutdownWorker and long polls are not counted: heartbeats meet admission control instead.`,
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
	MaxWorkersPerNamespace = NewNamespaceIntSetting(
		"worker.maxWorkersPerNamespace",
		1_000_000,
		`Worker records (ACTIVE, INACTIVE and CLEANED_UP) a namespace may hold; a heartbeat that would
register one more is refused with ResourceExhausted. Counted from the store at every recount
(worker.stateRecountInterval) plus the state changes this host committed since; 0 or less: no
limit.`,
	)
	WorkerRegistrationRPS = NewNamespaceFloatSetting(
		"worker.registrationRPS",
		1000,
		`New worker instance keys per second a history host registers for one namespace, sustained,
against crash-looping fleets that mint a new key on each start; worker.registrationBurst more
may register at once. Beyond both, a registration is refused with ResourceExhausted. Heartbeats
of known workers are not limited. 0 or less: no limit.`,
	)
	WorkerRegistrationBurst = NewNamespaceIntSetting(
		"worker.registrationBurst",
		100_000,
		`New worker instance keys a history host registers for one namespace at once, beyond
worker.registrationRPS: each SDK worker process mints a new key when it starts, so a deploy of a
fleet registers all of it within an interval. A fleet no larger than this registers at the
pace the host's store keeps (queued behind known workers' heartbeats, not refused while the wait
fits the call's deadline); only a namespace that keeps minting keys faster than
worker.registrationRPS is refused. Less than one second's worth of
worker.registrationRPS counts as one second's worth.`,
	)
)

// Admission control (history) and the expiry brake.
var (
	EarlyRefusalTargetWait = NewGlobalDurationSetting(
		"frontend.earlyRefusalTargetWait",
		500*time.Millisecond,
		`While the writes queued in history, or the heartbeats on their way to it, have kept new
heartbeats waiting longer than this for a whole second, the frontend refuses a share of heartbeats in the
transport, before reading them (ResourceExhausted, which the SDKs retry): the share grows with the excess, to all of them at
twice the wait; a heartbeat whose wait would run past its own deadline is refused whatever the
share. A refusal there costs a fraction of one made by history after reading the call. 0
disables early refusal; history's admission still refuses what it cannot serve.`,
	)
	AdmissionMaxInFlightPerShard = NewGlobalIntSetting(
		"history.admissionMaxInFlightPerShard",
		32,
		`Most calls history serves at once per shard; the others wait, heartbeats of known workers
first, then registrations, then reads. The limit in force adapts between
history.admissionMinInFlightPerShard and this, by the time admitted writes take against
history.admissionTargetLatency.`,
	)
	AdmissionMinInFlightPerShard = NewGlobalIntSetting(
		"history.admissionMinInFlightPerShard",
		2,
		`Fewest calls history serves at once per shard, however slow its writes: the floor of the
adaptive in-flight limit.`,
	)
	AdmissionTargetLatency = NewGlobalDurationSetting(
		"history.admissionTargetLatency",
		200*time.Millisecond,
		`Time an admitted write may take (mostly waiting for its group commit) before history
serves fewer calls at once: while writes take longer, the in-flight limit per shard shrinks by a
quarter every 250 ms; while they are quicker and calls wait for a slot, it grows by one. 0
disables adaptation (the limit is history.admissionMaxInFlightPerShard).`,
	)
	OutboundYieldMax = NewGlobalDurationSetting(
		"history.outboundYieldMax",
		time.Second,
		`Longest the hand-backs of a dead or stopped worker's activities to their shards wait while
heartbeats or registrations wait for admission, so that the host serves its callers first.
0: never hold them.`,
	)
	AdmissionMaxQueueDelay = NewGlobalDurationSetting(
		"history.admissionMaxQueueDelay",
		2*time.Second,
		`Longest a read (a describe or a list) may be expected to wait for a slot; one that would
wait longer (or past its own deadline) is refused at once with ResourceExhausted, so that an
overloaded host never keeps a queue its callers time out in. Heartbeats and registrations have
their own bound, history.admissionHeartbeatMaxQueueDelay. 0: only the caller's deadline bounds
the wait.`,
	)
	AdmissionHeartbeatMaxQueueDelay = NewGlobalDurationSetting(
		"history.admissionHeartbeatMaxQueueDelay",
		10*time.Second,
		`Longest a heartbeat, a registration (a worker's first heartbeat) included, may be expected
to wait for a slot, within its own deadline; one that would wait longer is refused at once with
ResourceExhausted. Longer than the bound of reads (history.admissionMaxQueueDelay): a heartbeat
that reaches admission has been read, decoded and authorized already, and refused there that
work is lost, while the frontend's early refusal in front keeps the queue short by refusing
heartbeats before they are read. A fleet's start thus registers at the pace the store keeps,
known workers first, within the memory bound of history.admissionMaxQueued. 0: only the
heartbeat's deadline bounds its wait.`,
	)
	AdmissionMaxQueued = NewGlobalIntSetting(
		"history.admissionMaxQueued",
		20000,
		`Most calls waiting for a slot, host-wide; beyond it calls are refused with
ResourceExhausted at once. Bounds the memory held by waiting work.`,
	)
	AdmissionMaxQueuedBytes = NewGlobalIntSetting(
		"history.admissionMaxQueuedBytes",
		64<<20,
		`Most payload bytes of the calls waiting for a slot, host-wide; beyond it calls are refused
with ResourceExhausted at once.`,
	)
	ExpiryBrakeQueueDelay = NewGlobalDurationSetting(
		"history.expiryBrakeQueueDelay",
		2*time.Second,
		`The host is behind, and the expiry brake holds every lease expiry, while heartbeats spend
longer than this in history (waiting for a slot, then for their write): a lease that runs out
now more likely lost its heartbeat in the queue than its worker. 0 disables this trigger.`,
	)
	ExpiryBrakeRefusedShare = NewGlobalFloatSetting(
		"history.expiryBrakeRefusedShare",
		0.01,
		`The host is behind, and the expiry brake holds every lease expiry, while more than this
share of the last 5 seconds' heartbeats (at least 5 of them) were refused with
ResourceExhausted, in the transport or by admission, dropped past their deadline, or renewed
their worker's lease with less than a third of it left (held up on their way for an interval):
at a refused share r, a worker beating three times per lease loses all three with odds r³.
<= 0: only the queueing delay counts.`,
	)
	ExpiryBrakeCooldown = NewGlobalDurationSetting(
		"history.expiryBrakeCooldown",
		15*time.Second,
		`How long the host counts as behind after its heartbeats stopped waiting or being refused,
so that a passing dip does not turn the brake on and off. A lease's clock stands still while the
host is behind, this time included, so that workers whose heartbeats were refused get one
through before their expiries run.`,
	)
	ExpiryBrakeRecheck = NewGlobalDurationSetting(
		"history.expiryBrakeRecheck",
		2*time.Second,
		`How often a held lease expiry is looked at again. Held expiries wait in memory (no
write), and are released together at these ticks, oldest deadline first.`,
	)
	ExpiryBrakeThreshold = NewNamespaceFloatSetting(
		"worker.expiryBrakeThreshold",
		0.55,
		`Share of a namespace's ACTIVE workers (on a host) running out of lease that engages the
expiry brake (Kubernetes' unhealthyZoneThreshold): a mass expiry is more often the server's or
the network's fault than a mass crash. A worker is running out once less than a third of its
lease is left without a heartbeat (it missed a whole beat), or once its expiry was offered
within worker.expiryBrakeWindow. >= 1 disables.`,
	)
	ExpiryBrakeWindow = NewNamespaceDurationSetting(
		"worker.expiryBrakeWindow",
		30*time.Second,
		`How long an offered lease expiry (held or run) keeps counting against
worker.expiryBrakeThreshold.`,
	)
	ExpiryBrakeMinExpiries = NewNamespaceIntSetting(
		"worker.expiryBrakeMinExpiries",
		10,
		`Fewer expiring leases than this never engage the brake by share, however small the
namespace: a few real deaths are always detected.`,
	)
	ExpiryBrakeSecondaryRate = NewNamespaceFloatSetting(
		"worker.expiryBrakeSecondaryRate",
		0.1,
		`Lease expiries per second still run while the brake is on by share (Kubernetes'
secondary eviction rate), oldest first, so that a real mass death is not hidden for ever; only
of workers silent for worker.expiryBrakeWindow beyond their deadline.
0 holds them all.`,
	)
	GCTargetInterval = NewGlobalDurationSetting(
		"system.gcTargetInterval",
		5*time.Second,
		`While the host allocates fast, GOGC is raised so that the Go collector's cycles come about
this far apart: room for this much of the allocation rate above the live heap, at most
system.gcMaxExtraBytes. Idle, GOGC returns to the GOGC the process started with, or lower on a
large heap (system.gcMinExtraBytes). 0 leaves GOGC alone, as does GOGC set in the environment
(vigil_gc_percent shows it).`,
	)
	GCMaxExtraBytes = NewGlobalIntSetting(
		"system.gcMaxExtraBytes",
		512<<20,
		`The most heap, in bytes above the live heap, that system.gcTargetInterval may let grow
between collections.`,
	)
	GCMinExtraBytes = NewGlobalIntSetting(
		"system.gcMinExtraBytes",
		32<<20,
		`The least heap, in bytes above the live heap, that the collector's pacing leaves between
collections. A live heap larger than this at the starting GOGC (a large fleet's cached
workers) is given the room system.gcTargetInterval's allocation needs, and at least this much,
instead of as much again as itself; a smaller one keeps the starting GOGC. A process with
GOMAXPROCS 1 gets twice this (its collector's marking shares the only core with the
requests). 0 never goes below the starting GOGC.`,
	)
)
