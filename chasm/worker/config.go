package worker

import (
	"time"

	"github.com/vigilhq/vigil/dynamicconfig"
)

// Dynamic config settings of orphan reconciliation (README.md, "Orphans"), declared here as
// the activity component declares its own. Read with the namespace NAME.
var (
	OrphanDetection = dynamicconfig.NewNamespaceBoolSetting(
		"worker.orphanDetection",
		true,
		`Reconcile the activity attempts bound to a live worker with the used activity slots its
SDK heartbeats report, and reschedule the attempts it does not run (a lost poll response or a
lost completion). Turn off in a namespace whose activities complete asynchronously
(ErrResultPending) without recording activity heartbeats: the SDK frees their slots.`,
	)
	OrphanDetectionGrace = dynamicconfig.NewNamespaceDurationSetting(
		"worker.orphanDetectionGrace",
		OrphanDetectionGraceDefault,
		`How long an attempt must have been bound, a slot mismatch must have lasted (over at
least two heartbeats), and the host must have been up, before orphan reconciliation takes an
attempt back.`,
	)
)

// HeartbeatWriteInterval bounds how long a worker's heartbeats may be answered from memory.
var HeartbeatWriteInterval = dynamicconfig.NewNamespaceDurationSetting(
	"worker.heartbeatWriteInterval",
	HeartbeatWriteIntervalDefault,
	`How long a live worker's heartbeats may renew its lease in memory before one is written: a
heartbeat that only moves the lease and the worker's snapshot is answered without a write
while it comes within this interval of the last written one and its deadline within this
interval of that one's. A crash loses at most this much of the snapshot (last heartbeat,
slots); no lease that was granted is lost, since the next owner lets such a worker's lease run
that much longer before it expires it. A graceful stop or shard handoff writes what was
answered from memory first, and loses nothing. 0 writes every heartbeat.`,
)

// HeartbeatWriteIntervalDefault writes about one heartbeat in ten of a worker beating every
// second, and delays at most this much the detection of a worker that dies as its shard moves.
const HeartbeatWriteIntervalDefault = 10 * time.Second

// OrphanDetectionGraceDefault covers a poll response or a completion in flight, and the
// unbinds still queued just after a restart, with a wide margin on a loaded host.
const OrphanDetectionGraceDefault = 5 * time.Second

// RescheduleChunkSizeDefault caps the activities one reschedule batch carries, and one
// fan-out task (all its batches together), so a worker with 100,000 bound activities produces
// tasks of bounded size.
const RescheduleChunkSizeDefault = 1000

// Config is what the Worker component reads at use time. Namespace-keyed settings are looked
// up by namespace NAME, as they are declared (a lookup by ID would never match an override).
type Config struct {
	// NumShards groups bound activities by the history shard that owns them.
	NumShards int32

	CleanupDelay            func(namespace string) time.Duration
	CleanedUpRetention      func(namespace string) time.Duration
	DefaultLeaseDuration    func(namespace string) time.Duration
	MinLeaseDuration        func(namespace string) time.Duration
	MaxLeaseDuration        func(namespace string) time.Duration
	LeaseIntervalMultiplier func(namespace string) float64
	MaxBindingsPerWorker    func(namespace string) int
	// RegistrationRPS bounds new worker keys per second per namespace, sustained (nil: no
	// limit); RegistrationBurst more may come at once (nil: one second's worth).
	RegistrationRPS   func(namespace string) float64
	RegistrationBurst func(namespace string) int
	// MaxWorkersPerNamespace bounds a namespace's worker records (nil or ≤ 0: no limit).
	MaxWorkersPerNamespace func(namespace string) int
	RescheduleChunkSize    int
	OrphanDetection        func(namespace string) bool
	OrphanDetectionGrace   func(namespace string) time.Duration
	// SuspectGracePeriod is worker.suspectGracePeriod (suspicion.go); nil: its default.
	SuspectGracePeriod func(namespace string) time.Duration
	// HeartbeatWriteInterval is worker.heartbeatWriteInterval; nil: every heartbeat is written.
	HeartbeatWriteInterval func(namespace string) time.Duration
}

// NewConfig reads the settings from dynamic config.
func NewConfig(dc *dynamicconfig.Collection, numShards int32) *Config {
	return &Config{
		NumShards:               numShards,
		CleanupDelay:            dynamicconfig.InactiveWorkerCleanupDelay.Get(dc),
		CleanedUpRetention:      dynamicconfig.CleanedUpWorkerRetention.Get(dc),
		DefaultLeaseDuration:    dynamicconfig.DefaultLeaseDuration.Get(dc),
		MinLeaseDuration:        dynamicconfig.MinLeaseDuration.Get(dc),
		MaxLeaseDuration:        dynamicconfig.MaxLeaseDuration.Get(dc),
		LeaseIntervalMultiplier: dynamicconfig.LeaseIntervalMultiplier.Get(dc),
		MaxBindingsPerWorker:    dynamicconfig.MaxBindingsPerWorker.Get(dc),
		RegistrationRPS:         dynamicconfig.WorkerRegistrationRPS.Get(dc),
		RegistrationBurst:       dynamicconfig.WorkerRegistrationBurst.Get(dc),
		MaxWorkersPerNamespace:  dynamicconfig.MaxWorkersPerNamespace.Get(dc),
		RescheduleChunkSize:     RescheduleChunkSizeDefault,
		OrphanDetection:         OrphanDetection.Get(dc),
		OrphanDetectionGrace:    OrphanDetectionGrace.Get(dc),
		SuspectGracePeriod:      SuspectGracePeriod.Get(dc),
		HeartbeatWriteInterval:  HeartbeatWriteInterval.Get(dc),
	}
}

func (c *Config) heartbeatWriteInterval(namespace string) time.Duration {
	if c.HeartbeatWriteInterval == nil {
		return 0
	}
	return max(c.HeartbeatWriteInterval(namespace), 0)
}

func (c *Config) orphanGrace(namespace string) time.Duration {
	if c.OrphanDetectionGrace == nil {
		return OrphanDetectionGraceDefault
	}
	return c.OrphanDetectionGrace(namespace)
}

// LeaseFor decides a heartbeat's lease:
//   - a requested duration (vigil's extended API) is used as is, within the bounds;
//   - an SDK heartbeat carries no request but, from its second beat on, the interval since its
//     last one: the lease is LeaseIntervalMultiplier times that interval, within the bounds, so
//     a worker is declared dead after missing that many beats whatever interval it chose;
//   - otherwise (an SDK worker's first beat) the namespace default, within the bounds.
func (c *Config) LeaseFor(namespace string, requested, reportedInterval time.Duration) time.Duration {
	lo, hi := c.MinLeaseDuration(namespace), c.MaxLeaseDuration(namespace)
	if hi < lo {
		hi = lo
	}
	lease := c.DefaultLeaseDuration(namespace)
	switch {
	case requested > 0:
		lease = requested
	case reportedInterval > 0:
		// In float64 and clamped before converting back: a reported interval near the largest
		// Duration times the multiplier does not fit in an int64, and the conversion of an
		// out-of-range float would wrap to a tiny (or negative) lease.
		scaled := float64(reportedInterval) * c.LeaseIntervalMultiplier(namespace)
		if scaled >= float64(hi) {
			return hi
		}
		lease = time.Duration(scaled)
	}
	return min(max(lease, lo), hi)
}
