package worker_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/chasm/chasmtest"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/overload"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// lateClock lets the brake share the chasmtest engine's clock, which exists only once the
// library (and so the brake) has been built.
type lateClock struct{ clock.TimeSource }

// fakeLoad is a host (or cluster) the test says is behind or not; it counts the late renewals
// the brake tells it of. With signal set, it is that signal (a real overload controller).
type fakeLoad struct {
	behind atomic.Bool
	late   atomic.Int64
	signal overload.Signal
}

func (l *fakeLoad) Behind() bool {
	if l.signal != nil {
		return l.signal.Behind()
	}
	return l.behind.Load()
}

func (l *fakeLoad) RenewedLate() {
	l.late.Add(1)
	if l.signal != nil {
		l.signal.RenewedLate()
	}
}

type brakeBundle struct {
	*bundle
	brake *worker.Brake
	load  *fakeLoad
}

func setupBrake(t *testing.T) *brakeBundle {
	t.Helper()
	dcClient := dynamicconfig.NewMemoryClient()
	logger := zaptest.NewLogger(t)
	dc := dynamicconfig.NewCollection(dcClient, logger)
	config := worker.NewConfig(dc, testNumShards)
	load := &fakeLoad{}
	ts := &lateClock{}
	brake := worker.NewBrake(worker.NewBrakeConfig(dc), load, ts, tally.NoopScope, logger)
	rescheduler := &recordingRescheduler{}
	lib := worker.NewLibrary(config, rescheduler, tally.NoopScope, logger, worker.WithExpiryBrake(brake))
	engine := chasmtest.NewEngine(t, chasmtest.NewRegistry(t, lib))
	ts.TimeSource = engine.Clock()
	// Every heartbeat written, so that a live worker's timer moves with its heartbeats and never
	// fires: the counts of offered and held expiries below are those of silent workers alone.
	dcClient.OverrideValue(worker.HeartbeatWriteInterval.Key(), "0s")
	dcClient.OverrideValue(dynamicconfig.ExpiryBrakeRecheck.Key(), time.Second)
	dcClient.OverrideValue(dynamicconfig.ExpiryBrakeCooldown.Key(), 5*time.Second)
	dcClient.OverrideNamespaceValue(dynamicconfig.ExpiryBrakeMinExpiries.Key(), testNamespace, 3)
	dcClient.OverrideNamespaceValue(dynamicconfig.ExpiryBrakeSecondaryRate.Key(), testNamespace, 0.0)
	return &brakeBundle{
		bundle: &bundle{
			t: t, engine: engine, rescheduler: rescheduler, dc: dcClient, config: config, ctx: context.Background(),
			handler: worker.NewHandler(engine, config, engine.Clock(), tally.NoopScope, logger),
		},
		brake: brake,
		load:  load,
	}
}

// setupBehindBrake is a brake whose host is behind, with n workers ("w-NN") that have just
// beaten with a 10s lease.
func setupBehindBrake(t *testing.T, n int) (*brakeBundle, []string) {
	t.Helper()
	b := setupBrake(t)
	keys := workerKeys("w", n)
	for _, k := range keys {
		b.mustBeat(k, withLease(10*time.Second))
	}
	b.setBehind(true)
	return b, keys
}

// setBehind says whether the host is behind, and lets the brake see it at once, as its own
// evaluation every recheck (Brake.Start) would.
func (b *brakeBundle) setBehind(behind bool) {
	b.load.behind.Store(behind)
	b.brake.Status(testNamespaceID)
}

func workerKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return keys
}

// run advances the clock second by second for d, beating every live worker every 2s.
func (b *brakeBundle) run(d time.Duration, live []string) {
	b.t.Helper()
	b.runFlaky(d, live, nil)
}

// runFlaky advances the clock second by second for d, beating steady workers every 2s and
// flaky ones every 12s, longer than their 10s lease: each flaky worker's expiry is offered
// before each of its beats. The brake looks at the host's load every second, as its own
// evaluation every recheck (Brake.Start) would.
func (b *brakeBundle) runFlaky(d time.Duration, steady, flaky []string) {
	b.t.Helper()
	for elapsed := time.Duration(0); elapsed < d; elapsed += time.Second {
		b.brake.Status(testNamespaceID)
		for _, k := range steady {
			if elapsed%(2*time.Second) == 0 {
				b.mustBeat(k, withLease(10*time.Second))
			}
		}
		for _, k := range flaky {
			if elapsed%(12*time.Second) == 0 {
				b.mustBeat(k, withLease(10*time.Second))
			}
		}
		b.engine.AdvanceTime(time.Second)
	}
}

func (b *brakeBundle) inactive(keys []string) int {
	b.t.Helper()
	n := 0
	for _, k := range keys {
		if b.status(k) == workerpb.WorkerStatus_WORKER_STATUS_INACTIVE {
			n++
		}
	}
	return n
}

func TestExpiryBrake(t *testing.T) {
	t.Parallel()

	// A heartbeat held up for an interval on its way, where history cannot see it wait, renews
	// a lease that has almost run out: the brake tells the host's load signal, which counts such
	// renewals as it counts refusals.
	t.Run("TellsTheLoadSignalOfLeasesRenewedLate", func(t *testing.T) {
		t.Parallel()
		b := setupBrake(t)
		b.mustBeat("w", withLease(9*time.Second))
		for range 3 {
			b.engine.AdvanceTime(3 * time.Second) // an interval: 6s of the lease are left
			b.mustBeat("w", withLease(9*time.Second))
		}
		require.Zero(t, b.load.late.Load(), "heartbeats on time")

		b.engine.AdvanceTime(6 * time.Second) // two intervals: the lease's last third
		b.mustBeat("w", withLease(9*time.Second))
		require.EqualValues(t, 1, b.load.late.Load())

		b.mustBeat("new", withLease(9*time.Second))
		b.engine.AdvanceTime(3 * time.Second)
		b.mustBeat("w", withLease(9*time.Second))
		require.EqualValues(t, 1, b.load.late.Load(), "a worker's first heartbeat renews nothing; the next came on time")
	})

	// One connection of the fleet stalls: history sees no queue and refuses nothing, and its
	// workers' heartbeats arrive in a burst once it moves again, with little of their leases
	// left. Those late renewals make the host behind (a real overload controller here), so
	// that when the connection stalls again for longer than a lease, its workers are not
	// declared INACTIVE; a worker that really died is still found.
	t.Run("LateHeartbeatsHoldTheExpiriesOfAStalledConnection", func(t *testing.T) {
		t.Parallel()
		b := setupBrake(t)
		ctl := overload.New(overload.Config{
			MaxInFlightPerShard: func() int { return 64 }, MinInFlightPerShard: func() int { return 1 },
			TargetLatency: func() time.Duration { return 0 }, MaxQueueDelay: func() time.Duration { return 0 },
			HeartbeatMaxQueueDelay: func() time.Duration { return 0 },
			MaxQueued:              func() int { return 1000 }, MaxQueuedBytes: func() int { return 1 << 20 },
			EarlyRefusalTargetWait: func() time.Duration { return 0 },
			BehindDelay:            func() time.Duration { return 2 * time.Second },
			BehindRefusedShare:     func() float64 { return 0.01 },
		}, b.engine.Clock(), tally.NoopScope)
		b.load.signal = ctl
		beat := func(k string) {
			release, err := ctl.Admit(b.ctx, 0, overload.ClassHeartbeat, 100)
			require.NoError(t, err)
			b.mustBeat(k, withLease(6*time.Second))
			release()
		}
		steady, stalled := workerKeys("steady", 15), workerKeys("stalled", 5)
		// Stalls of the stalled workers' connection: nothing from it arrives in [from, to),
		// and what it held arrives at to. The first is shorter than a lease, the second longer.
		stalls := []struct{ from, to int }{{9, 13}, {14, 22}}
		arrives := func(sec int) bool {
			for _, s := range stalls {
				if sec == s.to {
					return true
				}
				if sec >= s.from && sec < s.to {
					return false
				}
			}
			return sec%2 == 0
		}
		falseInactive := 0 // the stalled workers' INACTIVE seconds: a later heartbeat resurrects them
		for sec := range 40 {
			b.brake.Status(testNamespaceID)
			if sec > 0 {
				falseInactive += b.inactive(stalled)
			}
			if sec%2 == 0 {
				for _, k := range steady {
					beat(k)
				}
			}
			if sec <= 12 && sec%2 == 0 {
				beat("dead") // dies at 12: its lease runs out at 18
			}
			if arrives(sec) {
				for _, k := range stalled {
					beat(k)
				}
			}
			b.engine.AdvanceTime(time.Second)
		}
		require.Zero(t, falseInactive, "the stalled connection's workers are alive")
		require.Zero(t, b.inactive(steady))
		require.Equal(t, 1, b.inactive([]string{"dead"}), "a death is still found")
	})

	t.Run("HoldsAMassExpiryUntilReleasedThenExpiresOldestFirst", func(t *testing.T) {
		t.Parallel()
		b := setupBrake(t)
		b.dc.OverrideNamespaceValue(dynamicconfig.ExpiryBrakeThreshold.Key(), testNamespace, 0.3)
		live, silent := workerKeys("live", 10), workerKeys("silent", 10)
		// The silent half stops in two waves a second apart, so "oldest" means something.
		// When the first wave's leases run out, the second wave is overdue too: the brake
		// holds the very first expiry, with no settle time.
		for _, k := range append(append([]string{}, live...), silent...) {
			b.mustBeat(k, withLease(10*time.Second))
		}
		b.engine.AdvanceTime(time.Second)
		for _, k := range silent[:5] {
			b.mustBeat(k, withLease(10*time.Second))
		}

		b.run(30*time.Second, live)
		require.Zero(t, b.inactive(silent), "no lease may expire while the brake is on")
		require.Zero(t, b.inactive(live))
		st := b.brake.Status(testNamespaceID)
		require.True(t, st.Engaged)
		require.Equal(t, []string{worker.BrakeReasonShare}, st.Reasons)
		require.Equal(t, 10, st.Held)
		// Held, not run: each silent worker's expiry timer is still pending and valid.
		require.Len(t, b.engine.PendingTasksOfType("worker.leaseExpiry"), 20)
		// Held by the task's gate once the rule is on: at most the first offer of each silent
		// worker's expiry loads it, not every recheck (1s) of the 20s held.
		require.LessOrEqual(t, b.engine.DeferredPureTasks()-b.engine.GatedPureTasks(), len(silent))
		require.Greater(t, b.engine.GatedPureTasks(), 100)

		// The operator takes the brake off: every held expiry runs at the next tick.
		b.dc.OverrideNamespaceValue(dynamicconfig.ExpiryBrakeThreshold.Key(), testNamespace, 1.0)
		b.run(2*time.Second, live)
		require.Equal(t, 10, b.inactive(silent))
		require.Zero(t, b.inactive(live))
		// Oldest first: the wave that stopped first went INACTIVE no later than the second.
		first, second := b.describe(silent[5]).State.InactiveTime.AsTime(), b.describe(silent[0]).State.InactiveTime.AsTime()
		require.False(t, first.After(second))
		require.False(t, b.brake.Status(testNamespaceID).Engaged)
	})

	t.Run("SecondaryRateReleasesOnlyLongSilences", func(t *testing.T) {
		t.Parallel()
		b := setupBrake(t)
		b.dc.OverrideNamespaceValue(dynamicconfig.ExpiryBrakeThreshold.Key(), testNamespace, 0.3)
		b.dc.OverrideNamespaceValue(dynamicconfig.ExpiryBrakeWindow.Key(), testNamespace, 10*time.Second)
		b.dc.OverrideNamespaceValue(dynamicconfig.ExpiryBrakeSecondaryRate.Key(), testNamespace, 1.0)
		live, silent := workerKeys("live", 10), workerKeys("silent", 10)
		for _, k := range append(append([]string{}, live...), silent...) {
			b.mustBeat(k, withLease(10*time.Second))
		}
		// The silent leases run out at 10s. Until they have been silent a window longer (20s),
		// their heartbeats may still be queued in a server that was behind: none is released.
		b.run(19*time.Second, live)
		require.Zero(t, b.inactive(silent))
		require.True(t, b.brake.Status(testNamespaceID).Engaged)
		// Then they go at the secondary rate (1/s here), not all at once.
		b.run(4*time.Second, live)
		n := b.inactive(silent)
		require.Positive(t, n)
		require.Less(t, n, len(silent))
		require.Zero(t, b.inactive(live))
	})

	t.Run("DetectsAFewRealDeathsAtTheirDeadline", func(t *testing.T) {
		t.Parallel()
		b := setupBrake(t)
		keys := workerKeys("w", 20)
		for _, k := range keys {
			b.mustBeat(k, withLease(10*time.Second))
		}
		dead, live := keys[:2], keys[2:]
		b.run(9*time.Second, live)
		require.Zero(t, b.inactive(dead))
		b.run(time.Second, live)
		require.Equal(t, 2, b.inactive(dead), "found at their deadline, not held")
		for _, k := range dead {
			s := b.describe(k).State
			require.Equal(t, s.LeaseDeadline.AsTime(), s.InactiveTime.AsTime())
		}
		require.Zero(t, b.inactive(live))
		require.False(t, b.brake.Status(testNamespaceID).Engaged)
	})

	t.Run("GracefulShutdownsDoNotCountAsExpiring", func(t *testing.T) {
		t.Parallel()
		b := setupBrake(t)
		b.dc.OverrideNamespaceValue(dynamicconfig.ExpiryBrakeThreshold.Key(), testNamespace, 0.3)
		keys := workerKeys("w", 40)
		for _, k := range keys {
			b.mustBeat(k, withLease(10*time.Second))
		}
		// A deploy stops most of the fleet as the SDK does, and three workers crash meanwhile:
		// 3 of the 16 left (under the threshold), not 27 of 40.
		stopped, crashed, live := keys[:24], keys[24:27], keys[27:]
		for _, k := range stopped {
			b.shutdown(k)
		}
		b.run(10*time.Second, live)
		require.Equal(t, len(crashed), b.inactive(crashed), "the crashed workers are found at their deadline")
		require.False(t, b.brake.Status(testNamespaceID).Engaged)
	})

	t.Run("HoldsExpiriesWhileTheServerIsBehind", func(t *testing.T) {
		t.Parallel()
		b := setupBrake(t)
		keys := workerKeys("w", 4)
		for _, k := range keys {
			b.mustBeat(k, withLease(10*time.Second))
		}
		b.setBehind(true)
		b.run(20*time.Second, keys[1:])
		require.Zero(t, b.inactive(keys))
		st := b.brake.Status(testNamespaceID)
		require.True(t, st.Engaged)
		require.Equal(t, []string{worker.BrakeReasonBehind}, st.Reasons)
		// A host that is behind holds every expiry without loading its worker: the held timer
		// is deferred by its gate, not by its executor, and offered again only when the brake
		// could be off (each cooldown, 5s), not at every recheck (1s): about 15s of holding.
		require.Positive(t, b.engine.GatedPureTasks())
		require.LessOrEqual(t, b.engine.GatedPureTasks(), 4)
		require.Len(t, b.engine.PendingTasksOfType("worker.leaseExpiry"), len(keys), "held, still pending")

		// Caught up: the brake comes off after the cooldown (5s), but the silent worker's
		// lease ran only while the host was behind, so its clock stood still throughout: it
		// waits a whole lease (10s) more from the catch-up; then it is found, the others not.
		loadedHolds := b.engine.DeferredPureTasks() - b.engine.GatedPureTasks()
		b.setBehind(false)
		b.run(3*time.Second, keys[1:])
		require.Zero(t, b.inactive(keys), "the cooldown gives delayed heartbeats time to land")
		b.run(5*time.Second, keys[1:])
		require.False(t, b.brake.Status(testNamespaceID).Engaged)
		require.Zero(t, b.inactive(keys), "a worker held while the host was behind gets a whole lease after it caught up")
		b.run(10*time.Second, keys[1:])
		require.Equal(t, 1, b.inactive(keys[:1]))
		require.Zero(t, b.inactive(keys[1:]))
		require.Equal(t, loadedHolds, b.engine.DeferredPureTasks()-b.engine.GatedPureTasks(),
			"held through that lease by its gate too, its worker never loaded to be held")
	})

	t.Run("HoldsEveryExpiryForAsLongAsTheHostIsBehind", func(t *testing.T) {
		t.Parallel()
		// A host that is behind cannot tell a death from its own refusals, however long that
		// lasts; the silent worker is found a lease after it caught up, not before.
		b, keys := setupBehindBrake(t, 4)
		b.run(300*time.Second, keys[1:])
		require.Zero(t, b.inactive(keys))
		require.True(t, b.brake.Status(testNamespaceID).Engaged)
		b.setBehind(false)
		b.run(5*time.Second+9*time.Second, keys[1:]) // the cooldown, then most of a lease
		require.Zero(t, b.inactive(keys))
		b.run(3*time.Second, keys[1:])
		require.Equal(t, 1, b.inactive(keys[:1]))
		require.Zero(t, b.inactive(keys[1:]))
	})

	t.Run("LiveTimersDoNotComeBackTogetherWhenTheHostCatchesUp", func(t *testing.T) {
		t.Parallel()
		// As by default: heartbeats every second on a 3s lease, one in ten written, the others
		// answered from memory; the brake's cooldown 15s. A live worker's timer fires about
		// once a lease and waits for the deadline its heartbeats moved. While the host is
		// behind the brake holds those timers until it could come off; when it has caught up
		// they must not all come back on that tick, which would load every worker of the host
		// at once just as it recovered: held until then, they came back at twice the steady
		// rate for the next 8s.
		b := setupBrake(t)
		b.dc.OverrideValue(worker.HeartbeatWriteInterval.Key(), worker.HeartbeatWriteIntervalDefault)
		b.dc.OverrideValue(dynamicconfig.ExpiryBrakeCooldown.Key(), dynamicconfig.ExpiryBrakeCooldown.Default())
		keys := workerKeys("w", 30)
		second := 0
		offered := func() int {
			return b.engine.DeferredPureTasks() + b.engine.ExecutedPureTasks() + b.engine.PrunedTasks()
		}
		// tick beats every worker that has started (worker i at second i%10, so that their
		// written heartbeats are spread) and advances a second; it returns the expiry timers
		// offered in that second.
		tick := func() int {
			b.brake.Status(testNamespaceID)
			for i, k := range keys {
				if second >= i%10 {
					b.mustBeat(k, withLease(3*time.Second))
				}
			}
			before := offered()
			b.engine.AdvanceTime(time.Second)
			second++
			return offered() - before
		}
		for range 30 {
			tick()
		}
		b.setBehind(true)
		for range 40 {
			tick()
		}
		require.True(t, b.brake.Status(testNamespaceID).Engaged)
		b.setBehind(false)
		var perSecond []int
		for range 30 {
			perSecond = append(perSecond, tick())
		}
		require.False(t, b.brake.Status(testNamespaceID).Engaged)
		require.Zero(t, b.inactive(keys))
		// A worker's timer fires about every other second (12 of 30 a second): no second
		// after the catch-up may see more than that.
		require.LessOrEqual(t, slices.Max(perSecond), 12, "timers offered each second after the catch-up: %v", perSecond)
	})

	t.Run("FindsADeathWhileTheHostKeepsFallingBehind", func(t *testing.T) {
		t.Parallel()
		// The host is behind for 2s (then its 5s cooldown) out of every 13s, and refuses
		// every heartbeat then: the live workers get theirs through only in the 6s between.
		// A lease's clock stops while the host is behind, so the silent worker is found once
		// it has missed a whole lease (10s) of normal service, in the third round, and a
		// live worker is never found however long this goes on. Were every catch-up to give
		// each lease a whole lease more, the silent worker would never be found: the host
		// falls behind again before that.
		b, keys := setupBehindBrake(t, 4)
		silent, live := keys[:1], keys[1:]
		round := func() {
			b.setBehind(true)
			b.run(2*time.Second, nil)
			b.setBehind(false)
			b.run(5*time.Second, nil)
			b.run(6*time.Second, live)
		}
		round()
		require.Zero(t, b.inactive(keys), "7s of normal service so far")
		round()
		round()
		require.Equal(t, 1, b.inactive(silent))
		for range 10 {
			round()
		}
		require.Zero(t, b.inactive(live))
	})

	t.Run("TheShareRuleWaitsOutTheLeaseAfterTheCatchUp", func(t *testing.T) {
		t.Parallel()
		// 4 silent and 14 flaky workers of 30 while the host is behind: the flaky ones beat
		// every 12s on a 10s lease, so the host sees most of its workers overdue, as it would
		// after refusing their heartbeats. The share rule is not judged then, nor in the lease
		// after the catch-up, when the flaky workers' overdue leases are still the host's
		// doing: 18 of 30 overdue would be over the threshold and hold the real deaths at the
		// secondary rate. Once every worker has had a lease to beat, the 4 silent ones are
		// found, and the flaky ones are not held for the host's sake any more.
		b, keys := setupBehindBrake(t, 30)
		silent, flaky, steady := keys[:4], keys[4:18], keys[18:]
		b.runFlaky(60*time.Second, steady, flaky)
		require.Equal(t, []string{worker.BrakeReasonBehind}, b.brake.Status(testNamespaceID).Reasons)
		b.setBehind(false)
		b.run(8*time.Second, append(append([]string{}, steady...), flaky...)) // the cooldown (5s), then 3s of the lease after it
		require.False(t, b.brake.Status(testNamespaceID).Engaged)
		require.Zero(t, b.inactive(keys), "held through the lease after the catch-up")
		b.run(10*time.Second, append(append([]string{}, steady...), flaky...))
		require.Equal(t, len(silent), b.inactive(silent))
		require.Zero(t, b.inactive(flaky))
		require.Zero(t, b.inactive(steady))
		require.False(t, b.brake.Status(testNamespaceID).Engaged)
	})
}
