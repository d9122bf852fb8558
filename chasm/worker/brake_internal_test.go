package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
)

// TestBehindTimes checks the bookkeeping behind a stopped lease clock: how long the host was
// behind within a lease, and which times behind are kept.
func TestBehindTimes(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	times := func(spans ...[2]int) []behindTime {
		var bts []behindTime
		for _, s := range spans {
			bts = append(bts, behindTime{start: at(s[0]), end: at(s[1])})
		}
		return bts
	}

	t.Run("BehindWithin", func(t *testing.T) {
		t.Parallel()
		b := &Brake{behindTimes: times([2]int{10, 20}, [2]int{30, 35}, [2]int{50, 60})}
		for _, tt := range []struct {
			from, to int
			want     int
		}{
			{0, 100, 25},
			{15, 100, 20}, // half of the first
			{20, 100, 15}, // the first ended as the lease began
			{32, 55, 8},   // parts of the second and the third
			{61, 100, 0},
			{0, 5, 0},
		} {
			require.Equal(t, time.Duration(tt.want)*time.Second, b.behindWithinLocked(at(tt.from), at(tt.to)), "%d..%d", tt.from, tt.to)
		}
	})

	t.Run("KeepsWhatALeaseCanStillReachBackTo", func(t *testing.T) {
		t.Parallel()
		// With a 10s lease: after [50,60] only 3s of service (to 63), after [30,35] 3+15 =
		// 18s. A lease that began before 35 has run out whatever the host did before it.
		b := &Brake{longestLease: 10 * time.Second, behindTimes: times([2]int{10, 20}, [2]int{30, 35}, [2]int{50, 60})}
		b.pruneBehindTimesLocked(at(63))
		require.Equal(t, times([2]int{50, 60}), b.behindTimes)

		// Back to back times behind, with 1s of service between them, all stay: a lease that
		// began at 9 has had 2s of service since (9..10 and 20..21), not 10s.
		b = &Brake{longestLease: 10 * time.Second, behindTimes: times([2]int{10, 20}, [2]int{21, 40}, [2]int{41, 60})}
		b.pruneBehindTimesLocked(at(61))
		require.Len(t, b.behindTimes, 3)
	})

	t.Run("MergesTheOldestPastTheBound", func(t *testing.T) {
		t.Parallel()
		load := &behindSwitch{}
		b := &Brake{load: load, longestLease: time.Hour, scope: tally.NoopScope, logger: zap.NewNop(),
			cfg: BrakeConfig{Cooldown: func() time.Duration { return 5 * time.Second }}}
		for i := range maxBehindTimes + 2 {
			load.on = true
			b.evaluateBehindLocked(at(10 * i))
			load.on = false
			b.evaluateBehindLocked(at(10*i + 5))
		}
		require.Len(t, b.behindTimes, maxBehindTimes)
		// The first three are one, their gaps counted as behind: expiries only wait longer.
		require.Equal(t, behindTime{start: at(0), end: at(25)}, b.behindTimes[0])
		require.Equal(t, behindTime{start: at(30), end: at(35)}, b.behindTimes[1])
	})
}

type behindSwitch struct{ on bool }

func (s *behindSwitch) Behind() bool { return s.on }
func (s *behindSwitch) RenewedLate() {}
