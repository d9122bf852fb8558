package bench_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/bench"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/tests/testcluster"
)

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("LivenessAPIDetectsKilledWorkersAndHandsBackTheirActivities", func(t *testing.T) {
		t.Parallel()
		cluster := testcluster.New(t, testcluster.Options{})
		var progress strings.Builder
		s, err := bench.Run(context.Background(), bench.Config{
			Address:       cluster.Address(),
			API:           bench.APILiveness,
			Workers:       20,
			Interval:      200 * time.Millisecond,
			Duration:      2 * time.Second,
			Activities:    5,
			Kill:          2,
			Lease:         time.Second,
			ServerPID:     os.Getpid(), // the in-process server
			ShutdownAtEnd: true,
			Seed:          1,
		}, &progress)
		require.NoError(t, err)
		logSummary(t, s)

		requireHeartbeatsAccountedFor(t, s)
		require.Positive(t, s.HeartbeatsOK)
		require.NotNil(t, s.Kill)
		require.Equal(t, 2, s.Kill.Killed)
		require.Equal(t, 2, s.Kill.Detected, "notes: %v", s.Kill.Notes)
		require.Equal(t, 2, s.Kill.HandedBack)
		require.Equal(t, int64(2*5), s.Kill.ActivitiesAtKill, "each killed worker had its 5 activities bound")
		require.NotNil(t, s.DetectionP99Ms)
		require.NotNil(t, s.RedispatchAllMs)
		require.NotNil(t, s.Server)
		require.Positive(t, s.Server.MaxRSSMiB)
		require.Equal(t, int64(20-2), s.Shutdowns, "every worker still alive shut down at the end")
		require.NotNil(t, s.Cost, "with a server pid, the server's CPU per heartbeat over the run")
		require.Positive(t, s.Cost.Steady.HeartbeatsOK)
		require.Contains(t, progress.String(), "hb/s")

		requireJSONFields(t, s, "offered_per_s", "throughput_per_s", "p50_ms", "p95_ms", "p99_ms", "max_ms",
			"errors", "detection_p99_ms", "redispatch_all_ms", "schedule_lag_p99_ms", "generator_behind")
		require.Positive(t, s.ScheduleLagMaxMs, "the generator timed its own heartbeats")
	})

	t.Run("PublicAPIGroupsWorkersAndChurns", func(t *testing.T) {
		t.Parallel()
		// A restarted worker's first heartbeat gets the default lease; keep it short so that a
		// worker killed right after a restart is not waited for 30 s.
		cluster := testcluster.New(t, testcluster.Options{DynamicConfig: map[dynamicconfig.Key]any{
			dynamicconfig.DefaultLeaseDuration.Key(): "1s",
		}})
		s, err := bench.Run(context.Background(), bench.Config{
			Address:          cluster.Address(),
			API:              bench.APIPublic,
			Workers:          20,
			WorkersPerClient: 2,
			Interval:         200 * time.Millisecond,
			Duration:         2 * time.Second,
			Churn:            20,
			Kill:             2,
			Seed:             2,
		}, nil)
		require.NoError(t, err)
		logSummary(t, s)

		requireHeartbeatsAccountedFor(t, s)
		require.Equal(t, s.HeartbeatsSent, 2*s.RPCs, "one request carries both workers of a client")
		require.Positive(t, s.Churned)
		require.Equal(t, 2*s.Churned, s.Shutdowns, "a restarted client shuts both its workers down")
		require.Equal(t, 2, s.Kill.Detected, "notes: %v", s.Kill.Notes)
		requireJSONFields(t, s, "offered_per_s", "throughput_per_s", "p99_ms", "errors", "detection_p99_ms")
	})

	t.Run("AlternatingLoadIsMeasuredPhaseByPhase", func(t *testing.T) {
		t.Parallel()
		cluster := testcluster.New(t, testcluster.Options{})
		s, err := bench.Run(context.Background(), bench.Config{
			Address:         cluster.Address(),
			API:             bench.APILiveness,
			Workers:         20,
			Interval:        200 * time.Millisecond,
			Lease:           2 * time.Second,
			Duration:        3500 * time.Millisecond,
			Warmup:          500 * time.Millisecond,
			Alternate:       2,
			AlternatePeriod: time.Second,
			AlternateSettle: 250 * time.Millisecond,
			Seed:            3,
		}, nil)
		require.NoError(t, err)
		logSummary(t, s)

		a := s.Alternate
		require.NotNil(t, a)
		// Three phases of 1 s in the 3 s measured: base, 2x, base; each settled for 0.75 s.
		require.InDelta(t, 1.5, a.BaseS, 0.001)
		require.InDelta(t, 0.75, a.HighS, 0.001)
		require.Positive(t, a.BaseRate.ThroughputPerS)
		require.Positive(t, a.HighRate.ThroughputPerS)
		// The 2x phases were offered about twice the base phases' heartbeats a second (jitter
		// and the phase edges blur it): slots come due on the schedule whether or not the
		// server keeps up (a slot missed while the last RPC was out is offered all the same).
		// What was carried depends on the machine's speed, so only its bookkeeping is checked.
		require.InDelta(t, 2, a.HighRate.OfferedPerS/a.BaseRate.OfferedPerS, 0.6)
		for _, r := range []bench.PhaseRates{a.BaseRate, a.HighRate} {
			// A slot is offered as its timer fires and sent a moment later, which may fall on
			// the other side of a settle mark: a few heartbeats' slack.
			require.LessOrEqual(t, r.ThroughputPerS+r.FailedPerS, 1.1*r.OfferedPerS)
		}
		require.InDelta(t, a.HighRate.ThroughputPerS/a.BaseRate.ThroughputPerS, a.HighToBase, 1e-9)
		requireJSONFields(t, s, "alternate")
	})

	t.Run("WarmupIsLeftOutOfTheFigures", func(t *testing.T) {
		t.Parallel()
		cluster := testcluster.New(t, testcluster.Options{})
		s, err := bench.Run(context.Background(), bench.Config{
			Address:    cluster.Address(),
			API:        bench.APILiveness,
			Workers:    10,
			Interval:   200 * time.Millisecond,
			Duration:   2 * time.Second,
			Warmup:     time.Second,
			Activities: 3,
			Seed:       3,
		}, nil)
		require.NoError(t, err)
		logSummary(t, s)

		requireHeartbeatsAccountedFor(t, s)
		require.InDelta(t, 1.0, s.ElapsedS, 0.5, "figures cover the time after the warm-up")
		require.Equal(t, 1.0, s.WarmupS)
		// About 10 workers × 5 beats in the measured second, not the 100 of the whole run.
		require.Positive(t, s.HeartbeatsOK)
		require.Less(t, s.HeartbeatsOffered, int64(80))
		require.Zero(t, s.BindCount, "the first heartbeats, which bind, fell in the warm-up")
	})

	t.Run("SeveralAddressesRideOutAHostThatStops", func(t *testing.T) {
		t.Parallel()
		a := testcluster.New(t, testcluster.Options{})
		b := testcluster.New(t, testcluster.Options{})
		var mu sync.Mutex
		var answered []time.Time // send times of the heartbeats answered OK
		var failed []error
		observe := func(sent time.Time, _ time.Duration, _ int, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
				return
			}
			answered = append(answered, sent)
		}
		answeredSince := func(from time.Time) int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, at := range answered {
				if !at.Before(from) {
					n++
				}
			}
			return n
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := bench.Run(ctx, bench.Config{
				Address:          a.Address() + "," + b.Address(),
				API:              bench.APIPublic,
				Workers:          20,
				Interval:         200 * time.Millisecond,
				Duration:         time.Hour, // until cancelled
				Connections:      2,
				RetryUnavailable: true,
				Observe:          observe,
				Seed:             4,
			}, nil)
			done <- err
		}()
		require.Eventually(t, func() bool { return answeredSince(time.Time{}) >= 40 }, time.Minute, 10*time.Millisecond)
		b.Stop() // graceful: the calls it holds are answered, the next ones go to a alone
		stopped := time.Now()
		require.Eventually(t, func() bool { return answeredSince(stopped) >= 40 }, time.Minute, 10*time.Millisecond,
			"heartbeats stopped being answered when one of the two hosts went away")
		mu.Lock()
		require.Empty(t, failed, "a heartbeat failed: the stopped host was not left out, or its Unavailable not retried")
		mu.Unlock()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})

	t.Run("RegistrationBurstIsRetriedUntilEveryWorkerIsRegistered", func(t *testing.T) {
		t.Parallel()
		// worker.registrationRPS takes 20 new keys at once and 4 a second after: the burst of
		// 30, on top of the fleet's own 10, is partly refused however slowly a loaded machine
		// serves it (unless it takes over 4 s), and must be retried to the end.
		cluster := testcluster.New(t, testcluster.Options{DynamicConfig: map[dynamicconfig.Key]any{
			dynamicconfig.WorkerRegistrationRPS.Key():   4.0,
			dynamicconfig.WorkerRegistrationBurst.Key(): 20,
		}})
		var progress strings.Builder
		s, err := bench.Run(context.Background(), bench.Config{
			Address:         cluster.Address(),
			API:             bench.APILiveness,
			Workers:         10,
			Interval:        200 * time.Millisecond,
			Duration:        15 * time.Second,
			Activities:      2,
			RegisterBurst:   30,
			RegisterBurstAt: 500 * time.Millisecond,
			ShutdownAtEnd:   true,
			Seed:            5,
		}, &progress)
		require.NoError(t, err)
		logSummary(t, s)

		requireHeartbeatsAccountedFor(t, s)
		b := s.Burst
		require.NotNil(t, b)
		require.Equal(t, 30, b.Workers)
		require.Equal(t, int64(30), b.Registered, "errors: %v", b.ErrorsByCode)
		require.NotNil(t, b.AllRegisteredMs)
		require.Equal(t, b.AllRegisteredMs, s.BurstAllRegisteredMs)
		require.Positive(t, b.Refused, "10 new keys left cannot take 30 at once")
		require.Equal(t, b.Refused, b.ErrorsByCode["ResourceExhausted"])
		require.Equal(t, int64(30)+b.Refused, b.Attempts, "each refusal was retried, each worker answered OK once")
		require.Positive(t, b.RetriedWorkers)
		require.Equal(t, s.RPCs, b.During.Count+b.Outside.Count, "every fleet heartbeat falls inside or outside the window")
		require.Positive(t, b.During.Count, "the fleet heartbeated while the burst was registered")
		require.Equal(t, int64(10+30), s.Shutdowns, "the burst's workers are shut down with the fleet")
		require.Contains(t, progress.String(), "burst registered")
		requireJSONFields(t, s, "burst", "burst_all_registered_ms")
	})

	t.Run("SaysWhatTheFirstFailureOfEachCodeWas", func(t *testing.T) {
		t.Parallel()
		// A lease past worker.maxLeaseDuration: every heartbeat fails InvalidArgument, and the
		// summary says why.
		cluster := testcluster.New(t, testcluster.Options{DynamicConfig: map[dynamicconfig.Key]any{
			dynamicconfig.MaxLeaseDuration.Key(): "1m",
		}})
		s, err := bench.Run(context.Background(), bench.Config{
			Address: cluster.Address(), API: bench.APILiveness, Workers: 2, Interval: 50 * time.Millisecond,
			Duration: 500 * time.Millisecond, Lease: 2 * time.Minute, Seed: 5,
		}, nil)
		require.NoError(t, err)
		require.Positive(t, s.ErrorsByCode["InvalidArgument"])
		require.Contains(t, s.FirstErrors["InvalidArgument"], "lease")
		var text strings.Builder
		require.NoError(t, s.WriteText(&text))
		require.Contains(t, text.String(), "first error")
		require.Contains(t, text.String(), "InvalidArgument: "+s.FirstErrors["InvalidArgument"])
	})

	t.Run("RefusesAddressesOffThisMachine", func(t *testing.T) {
		t.Parallel()
		_, err := bench.Run(context.Background(), bench.Config{Address: "10.1.2.3:7233"}, nil)
		require.ErrorContains(t, err, "only loopback addresses")
		err = bench.Config{Address: "127.0.0.1:7233,10.1.2.3:7233"}.Validate()
		require.ErrorContains(t, err, "only loopback addresses", "every address of a list is checked")
	})

	t.Run("ActivitiesNeedTheLivenessAPI", func(t *testing.T) {
		t.Parallel()
		err := bench.Config{API: bench.APIPublic, Activities: 10}.Validate()
		require.ErrorContains(t, err, "--api liveness")
	})

	t.Run("AGeneratorBehindItsScheduleIsFlagged", func(t *testing.T) {
		t.Parallel()
		text := func(s bench.Summary) string {
			var b strings.Builder
			require.NoError(t, s.WriteText(&b))
			return b.String()
		}
		onTime := text(bench.Summary{ScheduleLagP50Ms: 0.2, ScheduleLagP99Ms: 3, ScheduleLagMaxMs: 40})
		require.Contains(t, onTime, "schedule lag ms")
		require.NotContains(t, onTime, "warning")

		behind := text(bench.Summary{ScheduleLagP50Ms: 900, ScheduleLagP99Ms: 41000, ScheduleLagMaxMs: 42000})
		require.Contains(t, behind, "the generator fell behind its own schedule (p99 41000 ms late)")
	})

	t.Run("AlternatingPhasesMustFitTheRun", func(t *testing.T) {
		t.Parallel()
		ok := bench.Config{Duration: 100 * time.Second, Warmup: 20 * time.Second, Alternate: 2, AlternatePeriod: 40 * time.Second}
		require.NoError(t, ok.Validate())
		for _, c := range []struct {
			change func(*bench.Config)
			want   string
		}{
			{func(c *bench.Config) { c.Alternate = -1 }, "alternate must not be negative"},
			{func(c *bench.Config) { c.AlternateSettle = -time.Second }, "alternate-settle must not be negative"},
			{func(c *bench.Config) { c.AlternateSettle = 40 * time.Second }, "longer than alternate-settle"},
			{func(c *bench.Config) { c.Warmup = 30 * time.Second }, "at least two phases"},
		} {
			cfg := ok
			c.change(&cfg)
			require.ErrorContains(t, cfg.Validate(), c.want)
		}
	})

	t.Run("WarmupMustBeShorterThanTheRun", func(t *testing.T) {
		t.Parallel()
		err := bench.Config{Duration: time.Second, Warmup: time.Second}.Validate()
		require.ErrorContains(t, err, "warmup")
	})
}

// requireHeartbeatsAccountedFor checks that every heartbeat sent ended as a success or an
// error: nothing is lost between the generator and its figures.
func requireHeartbeatsAccountedFor(t *testing.T, s bench.Summary) {
	t.Helper()
	require.Equal(t, s.HeartbeatsSent, s.HeartbeatsOK+s.HeartbeatsFailed)
	var byCode int64
	for _, n := range s.ErrorsByCode {
		byCode += n
	}
	require.Equal(t, s.Errors, byCode)
	require.LessOrEqual(t, s.HeartbeatsSent, s.HeartbeatsOffered)
}

func requireJSONFields(t *testing.T, s bench.Summary, fields ...string) {
	t.Helper()
	data, err := json.Marshal(s)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	for _, f := range fields {
		require.Contains(t, m, f)
	}
}

func logSummary(t *testing.T, s bench.Summary) {
	t.Helper()
	var b strings.Builder
	require.NoError(t, s.WriteText(&b))
	t.Log("\n" + b.String())
}
