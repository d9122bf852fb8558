package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestForKey(t *testing.T) {
	t.Run("IsStable", func(t *testing.T) {
		// Pinned values: changing the hash would strand every stored execution.
		require.Equal(t, ForKey("ns", "worker-1", 16), ForKey("ns", "worker-1", 16))
		require.EqualValues(t, 8, ForKey("default", "worker-1", 16))
		require.EqualValues(t, 1, ForKey("anything", "at-all", 1))
	})

	t.Run("SpreadsKeysOverEveryShard", func(t *testing.T) {
		const numShards = 8
		counts := make(map[int32]int)
		for i := range 8000 {
			s := ForKey("default", fmt.Sprintf("worker-%d", i), numShards)
			require.GreaterOrEqual(t, s, int32(1))
			require.LessOrEqual(t, s, int32(numShards))
			counts[s]++
		}
		require.Len(t, counts, numShards)
		for s, n := range counts {
			require.InDelta(t, 1000, n, 200, "shard %d", s)
		}
	})
}
