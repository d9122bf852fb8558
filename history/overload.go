package history

import (
	"github.com/uber-go/tally/v4"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/overload"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// NewOverloadConfig reads the overload controller's settings from dynamic config.
func NewOverloadConfig(dc *dynamicconfig.Collection) overload.Config {
	return overload.Config{
		MaxInFlightPerShard:    dynamicconfig.AdmissionMaxInFlightPerShard.Get(dc),
		MinInFlightPerShard:    dynamicconfig.AdmissionMinInFlightPerShard.Get(dc),
		TargetLatency:          dynamicconfig.AdmissionTargetLatency.Get(dc),
		MaxQueueDelay:          dynamicconfig.AdmissionMaxQueueDelay.Get(dc),
		HeartbeatMaxQueueDelay: dynamicconfig.AdmissionHeartbeatMaxQueueDelay.Get(dc),
		MaxQueued:              dynamicconfig.AdmissionMaxQueued.Get(dc),
		MaxQueuedBytes:         dynamicconfig.AdmissionMaxQueuedBytes.Get(dc),
		EarlyRefusalTargetWait: dynamicconfig.EarlyRefusalTargetWait.Get(dc),
		BehindDelay:            dynamicconfig.ExpiryBrakeQueueDelay.Get(dc),
		BehindRefusedShare:     dynamicconfig.ExpiryBrakeRefusedShare.Get(dc),
	}
}

// newOverloadFx is the host's overload controller: one per host, in front of every shard.
func newOverloadFx(dc *dynamicconfig.Collection, ts clock.TimeSource, scope tally.Scope) *overload.Controller {
	return overload.New(NewOverloadConfig(dc), ts, scope.SubScope("history"))
}
