package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAlternatePhases(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	r := &runner{cfg: Config{Interval: time.Second, Alternate: 2, AlternatePeriod: 10 * time.Second, AlternateSettle: 3 * time.Second}, measureFrom: t0}

	t.Run("TheWarmUpIsAnUnsettledBasePhase", func(t *testing.T) {
		p, settled := r.phaseAt(t0.Add(-time.Second))
		require.Equal(t, phaseBase, p)
		require.False(t, settled)
		require.Equal(t, time.Second, r.intervalAt(t0.Add(-time.Second)))
	})

	t.Run("PhasesAlternateBaseFirstAndSettleAfterTheirStart", func(t *testing.T) {
		for _, c := range []struct {
			at      time.Duration
			p       phase
			settled bool
		}{
			{0, phaseBase, false},
			{3 * time.Second, phaseBase, true},
			{10 * time.Second, phaseHigh, false},
			{12 * time.Second, phaseHigh, false},
			{13 * time.Second, phaseHigh, true},
			{20 * time.Second, phaseBase, false},
			{39 * time.Second, phaseHigh, true},
		} {
			p, settled := r.phaseAt(t0.Add(c.at))
			require.Equal(t, c.p, p, "at %v", c.at)
			require.Equal(t, c.settled, settled, "at %v", c.at)
		}
	})

	t.Run("AHighPhaseDividesTheInterval", func(t *testing.T) {
		require.Equal(t, time.Second, r.intervalAt(t0.Add(5*time.Second)))
		require.Equal(t, 500*time.Millisecond, r.intervalAt(t0.Add(15*time.Second)))
	})

	t.Run("SettledTimeCountsEachPhaseAfterItsSettle", func(t *testing.T) {
		// Base [0,10) and [20,30): 7 s each; high [10,20): 7 s, and [30,35) cut at the end: 2 s.
		d := r.settledTime(t0.Add(35 * time.Second))
		require.Equal(t, 14*time.Second, d[phaseBase])
		require.Equal(t, 9*time.Second, d[phaseHigh])
	})

	t.Run("WithoutAlternateNothingIsPhased", func(t *testing.T) {
		plain := &runner{cfg: Config{Interval: time.Second}, measureFrom: t0}
		_, settled := plain.phaseAt(t0.Add(15 * time.Second))
		require.False(t, settled)
		require.Equal(t, time.Second, plain.intervalAt(t0.Add(15*time.Second)))
		require.Nil(t, plain.alternateSummary(t0.Add(35*time.Second)))
	})
}
