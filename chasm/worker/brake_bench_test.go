package worker

import (
	"fmt"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// BenchmarkBrakeHoldLargeFleet is one held expiry judged by the share rule in a namespace of
// 100,000 ACTIVE workers, 1,000 of them silent, with the callers' times slightly out of order
// as concurrent task workers take them. The count behind the rule walks every record; it must
// not run for each call.
func BenchmarkBrakeHoldLargeFleet(b *testing.B) {
	ts := clock.NewFakeTimeSource()
	dc := dynamicconfig.NewCollection(dynamicconfig.NewMemoryClient(), zap.NewNop())
	brake := NewBrake(NewBrakeConfig(dc), nil, ts, tally.NoopScope, zap.NewNop())
	start := ts.Now()
	const lease = 90 * time.Second
	for i := range 100_000 {
		beat := start
		if i < 1000 {
			beat = start.Add(-lease) // silent: its lease runs out now
		}
		brake.noteLease("ns-id", "ns", fmt.Sprintf("w-%06d", i), &workerpb.WorkerState{
			Status:        statusActive,
			LeaseDuration: durationpb.New(lease),
			LeaseDeadline: timestamppb.New(beat.Add(lease)),
		}, false)
	}
	b.ResetTimer()
	for i := range b.N {
		now := start.Add(time.Duration(i) * time.Microsecond)
		if i%2 == 1 {
			now = now.Add(-time.Millisecond) // taken before the previous caller's
		}
		brake.Hold("ns-id", "ns", fmt.Sprintf("w-%06d", i%1000), start, now, lease)
	}
}
