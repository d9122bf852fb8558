package worker

import (
	"time"

	"github.com/vigilhq/vigil/dynamicconfig"
)

// RescheduleChunkSizeDefault caps the activities one ActivityRescheduleTask carries, so a
// worker with 100,000 bound activities produces tasks of bounded size.
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
	// RegistrationRPS bounds new worker keys per second per namespace (nil: no limit).
	RegistrationRPS     func(namespace string) float64
	RescheduleChunkSize int
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
		RescheduleChunkSize:     RescheduleChunkSizeDefault,
	}
}

// LeaseFor decides a heartbeat's lease:
//   - a requested duration (vigil's extended API) is used as is, within the bounds;
//   - an SDK heartbeat carries no request but, from its second beat on, the interval since its
//     last one: the lease is LeaseIntervalMultiplier times that interval, within the bounds, so
//     a worker is declared dead after missing that many beats whatever interval it chose;
//   - otherwise (an SDK worker's first beat) the namespace default, within the bounds.
func (c *Config) LeaseFor(namespace string, requested, reportedInterval time.Duration) time.Duration {
	lease := c.DefaultLeaseDuration(namespace)
	switch {
	case requested > 0:
		lease = requested
	case reportedInterval > 0:
		lease = time.Duration(float64(reportedInterval) * c.LeaseIntervalMultiplier(namespace))
	}
	lo, hi := c.MinLeaseDuration(namespace), c.MaxLeaseDuration(namespace)
	if hi < lo {
		hi = lo
	}
	return min(max(lease, lo), hi)
}
