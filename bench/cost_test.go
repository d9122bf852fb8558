package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCostArithmetic(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC)
	reading := func(atS float64, ticks float64, ok, reg, shutdowns int64) costReading {
		return costReading{at: t0.Add(time.Duration(atS * float64(time.Second))), ticks: ticks, ok: ok, reg: reg, shutdowns: shutdowns}
	}

	t.Run("CPUPerHeartbeatIsTheTicksBetweenTwoReadingsOverTheHeartbeatsAnsweredBetweenThem", func(t *testing.T) {
		// 16 s at 2,000 heartbeats a second; 640 ticks of 10 ms = 6.4 s of CPU.
		w := costWindow(t0, reading(10, 1000, 20_000, 2_000, 0), reading(26, 1640, 52_000, 2_000, 0))
		require.Equal(t, 10.0, w.FromS)
		require.Equal(t, 26.0, w.ToS)
		require.InDelta(t, 6400, w.ServerCPUMs, 1e-9)
		require.InDelta(t, 40, w.ServerCPUPct, 1e-9, "6.4 s of CPU in 16 s is 40 % of one core")
		require.Equal(t, int64(32_000), w.HeartbeatsOK)
		require.Zero(t, w.RegistrationsOK)
		us, ok := w.perHeartbeatUs()
		require.True(t, ok)
		require.InDelta(t, 200, us, 1e-9)
	})

	t.Run("AWindowWithoutAnswersHasNoCostPerHeartbeat", func(t *testing.T) {
		w := costWindow(t0, reading(10, 1000, 500, 0, 0), reading(26, 1100, 500, 0, 0))
		_, ok := w.perHeartbeatUs()
		require.False(t, ok)
	})

	t.Run("ARegistrationCostsWhatItsWindowSpentLessItsOrdinaryHeartbeats", func(t *testing.T) {
		// 1 s with 2,000 registrations and 100 ordinary heartbeats; 1.3 s of CPU. At 200 µs per
		// ordinary heartbeat, they spent 20 ms; the registrations the other 1,280 ms.
		w := costWindow(t0, reading(0, 0, 0, 0, 0), reading(1, 130, 2_100, 2_000, 0))
		us, ok := w.perRegistrationUs(200)
		require.True(t, ok)
		require.InDelta(t, 640, us, 1e-9)

		_, ok = costWindow(t0, reading(0, 0, 0, 0, 0), reading(1, 10, 50, 0, 0)).perRegistrationUs(200)
		require.False(t, ok, "no registration in the window")
	})

	t.Run("TheSummaryTakesTheBurstOverTheFleetsStart", func(t *testing.T) {
		readings := map[string]costReading{
			readStart:         reading(0, 0, 0, 0, 0),
			readFleetStarted:  reading(1, 100, 1_000, 1_000, 0),
			readSteadyFrom:    reading(10, 500, 10_000, 1_000, 0),
			readSteadyTo:      reading(20, 700, 20_000, 1_000, 0),
			readBurst:         reading(30, 900, 30_000, 1_000, 0),
			readBurstFinished: reading(32, 1000, 32_500, 1_500, 0),
		}
		s := costSummary(t0, readings, 10*time.Second, 0, nil)
		require.NotNil(t, s)
		require.InDelta(t, 200, s.CPUPerHeartbeatUs, 1e-9, "2 s of CPU over 10,000 heartbeats")
		require.Equal(t, registerBurstBasis, s.RegistrationBasis)
		require.NotNil(t, s.CPUPerRegistrationUs)
		// 1 s of CPU: 2,000 ordinary heartbeats at 200 µs spent 400 ms, 500 registrations 600 ms.
		require.InDelta(t, 1200, *s.CPUPerRegistrationUs, 1e-9)
		require.Equal(t, 10.0, s.TickMs)
		require.Empty(t, s.Notes)

		delete(readings, readBurst)
		delete(readings, readBurstFinished)
		s = costSummary(t0, readings, 10*time.Second, 0, nil)
		require.Equal(t, fleetStartBasis, s.RegistrationBasis)
		require.InDelta(t, 1000, *s.CPUPerRegistrationUs, 1e-9, "1 s of CPU over the fleet's 1,000 registrations")

		s = costSummary(t0, readings, 500*time.Millisecond, 0, nil)
		require.Nil(t, s.CPUPerRegistrationUs, "the fleet's last registration came after the warm-up")
		require.Contains(t, s.Notes[0], "not all registered within the warm-up")
	})

	t.Run("ABurstNotAllRegisteredGivesNoCostPerRegistration", func(t *testing.T) {
		s := costSummary(t0, map[string]costReading{
			readStart:      reading(0, 0, 0, 0, 0),
			readSteadyFrom: reading(10, 500, 10_000, 1_000, 0),
			readSteadyTo:   reading(20, 700, 20_000, 1_000, 0),
			readBurst:      reading(30, 900, 30_000, 1_000, 0),
		}, 10*time.Second, 0, nil)
		require.Nil(t, s.CPUPerRegistrationUs)
		require.Nil(t, s.Registrations)
		require.Contains(t, s.Notes[0], "not all registered")
	})

	t.Run("ChurnInTheSteadyWindowIsSaid", func(t *testing.T) {
		s := costSummary(t0, map[string]costReading{
			readSteadyFrom: reading(10, 500, 10_000, 1_000, 40),
			readSteadyTo:   reading(20, 700, 20_000, 1_500, 540),
		}, 0, 0, nil)
		require.Equal(t, int64(500), s.Steady.RegistrationsOK)
		require.Equal(t, int64(500), s.Steady.Shutdowns)
		require.Contains(t, s.Notes[0], "500 registrations and 500 shutdowns")
	})

	t.Run("TheStoresCPUIsReadOverTheSameWindowAndHeartbeats", func(t *testing.T) {
		from, to := reading(10, 500, 10_000, 1_000, 0), reading(20, 700, 20_000, 1_000, 0)
		from.storeTicks, to.storeTicks = 3_000, 3_150 // 1.5 s of PostgreSQL's CPU
		s := costSummary(t0, map[string]costReading{readSteadyFrom: from, readSteadyTo: to}, 0, 4242, nil)
		require.InDelta(t, 200, s.CPUPerHeartbeatUs, 1e-9, "the server's alone")
		require.InDelta(t, 1500, s.Steady.StoreCPUMs, 1e-9)
		require.Equal(t, 4242, s.StorePID)
		require.InDelta(t, 150, s.StoreCPUPerHeartbeatUs, 1e-9, "1.5 s over the same 10,000 heartbeats")

		s = costSummary(t0, map[string]costReading{readSteadyFrom: from, readSteadyTo: to}, 0, 0, nil)
		require.Zero(t, s.StoreCPUPerHeartbeatUs, "no store read without its pid")
	})

	t.Run("NoSteadyWindowNoSummary", func(t *testing.T) {
		require.Nil(t, costSummary(t0, map[string]costReading{readSteadyFrom: reading(10, 0, 0, 0, 0)}, 10*time.Second, 0, nil))
	})
}

func TestSteadyWindow(t *testing.T) {
	c := Config{Duration: 30 * time.Second, Warmup: 10 * time.Second}.withDefaults()
	from, to := c.steadyWindow()
	require.Equal(t, [2]time.Duration{10 * time.Second, 30 * time.Second}, [2]time.Duration{from, to}, "by default until the load ends")

	c.CPUWindow = 16 * time.Second
	_, to = c.steadyWindow()
	require.Equal(t, 26*time.Second, to)

	c = Config{Duration: 60 * time.Second, Warmup: 10 * time.Second, RegisterBurst: 100}.withDefaults()
	_, to = c.steadyWindow()
	require.Equal(t, 35*time.Second, to, "by default until the burst, halfway through the measured part")

	require.ErrorContains(t, Config{Duration: 30 * time.Second, Warmup: 10 * time.Second, CPUWindow: 21 * time.Second}.Validate(), "cpu-window")
	require.ErrorContains(t, Config{Duration: 60 * time.Second, Warmup: 10 * time.Second, CPUWindow: 30 * time.Second, RegisterBurst: 100}.Validate(), "by the burst")
	require.NoError(t, Config{Duration: 30 * time.Second, Warmup: 10 * time.Second, CPUWindow: 16 * time.Second}.Validate())
	require.ErrorContains(t, Config{Duration: 30 * time.Second, StorePID: 7}.Validate(), "store-pid needs server-pid")

	require.Equal(t, 10*time.Second, fleetRegistrationDeadline(Config{Interval: time.Second, Warmup: 10 * time.Second}))
	require.Equal(t, 2*time.Second, fleetRegistrationDeadline(Config{Interval: time.Second, Warmup: 10 * time.Second, Churn: 10, ChurnPeriod: 2 * time.Second}),
		"with churn, the first restart's registrations are not the fleet's")
}
