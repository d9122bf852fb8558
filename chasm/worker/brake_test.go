package worker_test

import (
	"context"
	"fmt"
	"math"
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
	"github.com/vigilhq/vigil/dynamicconfig"
)

// lateClock lets the brake share the chasmtest engine's clock, which exists only once the
// library (and so the brake) has been built.
type lateClock struct{ clock.TimeSource }

// fakeLoad is a host whose heartbeat queueing delay the test sets, and the share of heartbeats
// it refused, the same over any span (none known until the test sets one).
type fakeLoad struct {
	delay   atomic.Int64
	share   atomic.Uint64 // math.Float64bits
	known   atomic.Bool
	pending atomic.Int64 // RetriesPendingUntil, Unix nanoseconds; 0: none
}

func (l *fakeLoad) RetriesPendingUntil() time.Time {
	if n := l.pending.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func (l *fakeLoad) HeartbeatQueueDelay() time.Duration { return time.Duration(l.delay.Load()) }

func (l *fakeLoad) RefusedShare(_, _ time.Time) (float64, bool) {
	return math.Float64frombits(l.share.Load()), l.known.Load()
}

func (l *fakeLoad) refusing(share float64) {
	l.share.Store(math.Float64bits(share))
	l.known.Store(true)
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

// setupBehindBrake is a brake whose host is behind, refusing that share of heartbeats, with n
// workers ("w-NN") that have just beaten with a 10s lease.
func setupBehindBrake(t *testing.T, n int, refused float64) (*brakeBundle, []string) {
	t.Helper()
	b := setupBrake(t)
	keys := workerKeys("w", n)
	for _, k := range keys {
		b.mustBeat(k, withLease(10*time.Second))
	}
	b.load.delay.Store(int64(5 * time.Second))
	b.load.refusing(refused)
	return b, keys
}

// setupOftenBehindBrake is setupBehindBrake's, but the host saw the workers beat at 0s and 2s
// on their 10s lease (often: weighed by half leases) before it fell behind.
func setupOftenBehindBrake(t *testing.T, n int, refused float64) (*brakeBundle, []string) {
	t.Helper()
	b := setupBrake(t)
	keys := workerKeys("w", n)
	b.run(4*time.Second, keys)
	b.load.delay.Store(int64(5 * time.Second))
	b.load.refusing(refused)
	return b, keys
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
// before each of its beats.
func (b *brakeBundle) runFlaky(d time.Duration, steady, flaky []string) {
	b.t.Helper()
	for elapsed := time.Duration(0); elapsed < d; elapsed += time.Second {
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

	t.Run("RetriedRefusalsHoldOnlyShortLeasesWhileTheirBeatsMayStillCome", func(t *testing.T) {
		t.Parallel()
		// The host refuses heartbeats early, all of them of callers that send them again (the
		// Go SDK): none is lost, so the host is not behind. A lease of 20s or more cannot run out
		// while its worker's beats are still being retried (it would have missed one before),
		// so its death is found at its deadline; a shorter one waits until no refused beat can
		// still come, and not a lease more.
		b := setupBrake(t)
		live := workerKeys("live", 10)
		b.mustBeat("long", withLease(30*time.Second))
		b.mustBeat("short", withLease(6*time.Second))
		b.load.pending.Store(b.engine.Clock().Now().Add(40 * time.Second).UnixNano())

		b.run(32*time.Second, live)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, b.status("long"), "found at its deadline (30s)")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("short"),
			"its lease (6s) ran out 26s ago, but its beats may still be retried")
		require.False(t, b.brake.Status(testNamespaceID).Engaged, "no heartbeat was lost: the host is not behind")

		// The refused beats can no longer come (40s): the short lease expires at the next recheck.
		b.run(10*time.Second, live)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, b.status("short"))
		require.Zero(t, b.inactive(live))
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
		b.load.delay.Store(int64(5 * time.Second))
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
		// expiry, held while the host was behind, waits a whole lease (10s) more, as if its
		// lease had been refreshed when the host caught up; then it is found, the others not.
		loadedHolds := b.engine.DeferredPureTasks() - b.engine.GatedPureTasks()
		b.load.delay.Store(0)
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

	t.Run("ReleasesAnExpiryHeldWhileBehindOnceRefusalsNoLongerExplainTheSilence", func(t *testing.T) {
		t.Parallel()
		// The host stays behind, refusing half of all heartbeats. A live worker sends at least
		// one per lease and the 10s the host may hold its last one (heldGap): 20s here. That
		// all of them were refused has odds of 1/2 per such span of silence, below the default
		// 1e-6 after 20 spans (each weighed once admission.RetryHorizon, 10s, passed).
		b, keys := setupBehindBrake(t, 4, 0.5)
		b.run(370*time.Second, keys[1:])
		require.Zero(t, b.inactive(keys), "18 spans of silence: 1 in 262,000 that a live worker's heartbeats were all refused")
		require.True(t, b.brake.Status(testNamespaceID).Engaged)
		b.run(60*time.Second, keys[1:])
		require.Equal(t, 1, b.inactive(keys[:1]), "20 spans: below 1e-6")
		require.Zero(t, b.inactive(keys[1:]))
		require.True(t, b.brake.Status(testNamespaceID).Engaged, "the host is still behind")
	})

	t.Run("WeighsByHalfLeasesTheSilenceOfAWorkerSeenBeatingOften", func(t *testing.T) {
		t.Parallel()
		// As above, but the host saw the workers beat every 2s on their 10s lease before it
		// fell behind: a live one sends a heartbeat in every half lease and the 10s the host
		// may hold its last one, so each 15s span weighs 1/2, and 20 of them (300s of silence,
		// where whole leases took 400s) bring the odds below 1e-6.
		b, keys := setupOftenBehindBrake(t, 4, 0.5)
		b.run(260*time.Second, keys[1:])
		require.Zero(t, b.inactive(keys), "16 spans weighed: 1 in 65,000")
		b.run(60*time.Second, keys[1:])
		require.Equal(t, 1, b.inactive(keys[:1]), "20 spans: below 1e-6")
		require.Zero(t, b.inactive(keys[1:]))
		require.True(t, b.brake.Status(testNamespaceID).Engaged, "the host is still behind")
	})

	t.Run("DoesNotCountTheTimeTheHostHeldAHeartbeatAsSilence", func(t *testing.T) {
		t.Parallel()
		// The host is behind and loses 1 heartbeat in 20. A worker seen beating every 2s on
		// its 10s lease sends its next heartbeat only once its last is answered, and the host
		// may hold one for up to 10s (a patient one waits for its turn until its deadline):
		// four held in a row, each dropped at its deadline, leave a live worker silent for
		// 44s. Weighed by half leases alone (5s), that silence was six spans at 1/20 each,
		// odds of 1 in 64 million, and the worker was declared INACTIVE. Each span now also
		// holds the 10s the host may have held the heartbeat sent in it.
		b, keys := setupOftenBehindBrake(t, 4, 0.05)
		b.run(42*time.Second, keys[1:])
		require.Zero(t, b.inactive(keys), "two 15s spans weighed: 1 in 400")
		// Silent for good, it is found while the host is still behind: five spans weighed.
		b.run(50*time.Second, keys[1:])
		require.Equal(t, 1, b.inactive(keys[:1]), "five spans: 1 in 3.2 million")
		require.Zero(t, b.inactive(keys[1:]))
	})

	t.Run("HoldsWhileEveryHeartbeatIsRefused", func(t *testing.T) {
		t.Parallel()
		b, keys := setupBehindBrake(t, 2, 1)
		b.run(300*time.Second, keys[1:])
		require.Zero(t, b.inactive(keys), "a host refusing everything cannot tell a death from its own refusals")

		// The operator sets the odds to 0: nothing is released on evidence, whatever the share.
		b.dc.OverrideValue(dynamicconfig.ExpiryBrakeReleaseOdds.Key(), 0.0)
		b.load.refusing(0)
		b.run(60*time.Second, keys[1:])
		require.Zero(t, b.inactive(keys))
	})

	t.Run("TheShareRuleCountsOnlyDoubtfulSilencesThroughTheLeaseAfterTheCatchUp", func(t *testing.T) {
		t.Parallel()
		// As below: 4 silent and 14 flaky workers of 30 while the host is behind, refusing
		// half of all heartbeats. Once it has caught up, its refusals still explain the
		// flaky workers' overdue leases until each has had a lease to beat, and the rule
		// must not count them then either: 18 of 30 overdue would be over the threshold.
		b, keys := setupBehindBrake(t, 30, 0.5)
		flaky, steady := keys[4:18], keys[18:] // keys[:4] are silent
		b.runFlaky(60*time.Second, steady, flaky)
		require.Equal(t, []string{worker.BrakeReasonBehind}, b.brake.Status(testNamespaceID).Reasons)
		b.load.delay.Store(0)
		b.runFlaky(8*time.Second, steady, flaky) // the cooldown (5s), then 3s of the lease after it
		require.False(t, b.brake.Status(testNamespaceID).Engaged)
		require.Zero(t, b.inactive(keys), "held through the lease after the catch-up")
	})

	t.Run("TheShareRuleCountsOnlyTheSilenceTheHostsRefusalsDoNotExplain", func(t *testing.T) {
		t.Parallel()
		// While the host is behind and refusing half of all heartbeats, most of its live
		// workers lose a lease now and then: here flaky ones beat every 12s on a 10s lease,
		// so each one's expiry is offered (and held) before each beat. Counted as expiring,
		// they kept the share rule on for the whole overload, and the weighing's releases ran
		// at the secondary rate. The rule now counts only the silences the weighing doubts:
		// 4 silent workers of 30 (with 14 flaky: 60 % expiring) are found once their silence
		// is weighed (20 spans of a lease and heldGap); 18 of 30 are a mass silence, held
		// before the first is released.
		for _, c := range []struct {
			silent, flaky, found int
		}{{4, 14, 4}, {18, 6, 0}} {
			b, keys := setupBehindBrake(t, 30, 0.5)
			silent, flaky, steady := keys[:c.silent], keys[c.silent:c.silent+c.flaky], keys[c.silent+c.flaky:]
			b.runFlaky(430*time.Second, steady, flaky)
			require.Equal(t, c.found, b.inactive(silent), "%d of 30 silent", c.silent)
			require.Zero(t, b.inactive(flaky), "held while the host is behind, never weighed to a release")
			require.Zero(t, b.inactive(steady))
			require.Equal(t, c.found == 0, slices.Contains(b.brake.Status(testNamespaceID).Reasons, worker.BrakeReasonShare))
		}
	})
}
