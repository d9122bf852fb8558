package quotas

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestKeyedLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)

	t.Run("BurstIsOneSecondThenTheRate", func(t *testing.T) {
		l := NewKeyedLimiter(0)
		for range 3 {
			require.True(t, l.Allow("ns", 3, now))
		}
		require.False(t, l.Allow("ns", 3, now))
		require.True(t, l.Allow("other", 3, now), "keys have their own buckets")
		require.True(t, l.Allow("ns", 3, now.Add(time.Second/3)))
	})

	t.Run("ALargerBurstThenTheRate", func(t *testing.T) {
		l := NewKeyedLimiter(0)
		for range 10 {
			require.True(t, l.AllowBurst("ns", 2, 10, now))
		}
		require.False(t, l.AllowBurst("ns", 2, 10, now))
		require.True(t, l.AllowBurst("ns", 2, 10, now.Add(time.Second/2)))
		require.False(t, l.AllowBurst("ns", 2, 10, now.Add(time.Second/2)))
		require.True(t, l.AllowBurst("ns", 2, 11, now.Add(time.Second/2)), "a changed burst starts full")
	})

	t.Run("ABurstBelowOneSecondIsOneSecond", func(t *testing.T) {
		l := NewKeyedLimiter(0)
		for range 3 {
			require.True(t, l.AllowBurst("ns", 3, 1, now))
		}
		require.False(t, l.AllowBurst("ns", 3, 1, now))
	})

	t.Run("NoLimit", func(t *testing.T) {
		l := NewKeyedLimiter(0)
		for _, rps := range []float64{0, -1, math.Inf(1), math.NaN()} {
			for range 100 {
				require.True(t, l.Allow("ns", rps, now))
			}
		}
	})

	t.Run("AChangedRateStartsFull", func(t *testing.T) {
		l := NewKeyedLimiter(0)
		require.True(t, l.Allow("ns", 1, now))
		require.False(t, l.Allow("ns", 1, now))
		require.True(t, l.Allow("ns", 2, now))
	})

	t.Run("BoundedKeys", func(t *testing.T) {
		l := NewKeyedLimiter(2)
		require.True(t, l.Allow("a", 1, now))
		require.False(t, l.Allow("a", 1, now))
		require.True(t, l.Allow("b", 1, now))
		require.True(t, l.Allow("c", 1, now), "a third key starts the buckets over")
		require.True(t, l.Allow("a", 1, now), "a's bucket is full again")
		require.Len(t, l.buckets, 2)
	})
}
