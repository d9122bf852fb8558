package membership

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func hosts(n int) []Host {
	out := make([]Host, n)
	for i := range out {
		out[i] = Host{ID: fmt.Sprintf("vigil-%d", i+1)}
	}
	return out
}

func TestOwner(t *testing.T) {
	t.Run("NoHosts", func(t *testing.T) {
		_, ok := Owner("k", nil)
		require.False(t, ok)
	})

	t.Run("SameAnswerWhateverTheOrder", func(t *testing.T) {
		hs := hosts(5)
		reversed := []Host{hs[4], hs[3], hs[2], hs[1], hs[0]}
		for i := range 1000 {
			key := TaskQueueKey("ns", fmt.Sprint("queue-", i))
			a, _ := Owner(key, hs)
			b, _ := Owner(key, reversed)
			require.Equal(t, a.ID, b.ID)
		}
	})

	t.Run("LeaveMovesOnlyTheLeaversKeys", func(t *testing.T) {
		hs := hosts(4)
		survivors := append([]Host{}, hs[:2]...)
		survivors = append(survivors, hs[3])
		moved := 0
		for i := range 4000 {
			key := TaskQueueKey("ns", fmt.Sprint("queue-", i))
			before, _ := Owner(key, hs)
			after, _ := Owner(key, survivors)
			if before.ID != hs[2].ID {
				require.Equal(t, before.ID, after.ID, "key %q moved although its owner stayed", key)
				continue
			}
			moved++
		}
		// About a quarter of the keys were the leaver's.
		require.InDelta(t, 1000, moved, 200)
	})
}

func TestAssignShards(t *testing.T) {
	t.Run("EveryShardOnceWithinOneOfEven", func(t *testing.T) {
		for _, numShards := range []int32{1, 4, 16, 64} {
			for n := 1; n <= 8; n++ {
				a := AssignShards(numShards, hosts(n))
				require.Len(t, a, int(numShards))
				counts := map[string]int{}
				for _, id := range a {
					counts[id]++
				}
				lo, hi := int(numShards)/n, (int(numShards)+n-1)/n
				for _, h := range hosts(n) {
					require.GreaterOrEqual(t, counts[h.ID], lo, "%d shards over %d hosts: %v", numShards, n, counts)
					require.LessOrEqual(t, counts[h.ID], hi, "%d shards over %d hosts: %v", numShards, n, counts)
				}
			}
		}
	})

	t.Run("NoHosts", func(t *testing.T) {
		require.Empty(t, AssignShards(16, nil))
	})
}

// TestAssignShardsMovesLittle bounds how many shards change owner when one host leaves (a join
// is a leave played backwards). The leaver's shards must move; so do a few others, because
// each survivor's quota grows and a shard the survivor would now take may push out one it
// held. Measured worst cases over every leaver: 16 shards over 2..8 hosts: 0,1,2,2,3,2,3
// extra moves; 64 shards: 0,3,3,4,3,3,5. The bound is two per surviving host.
func TestAssignShardsMovesLittle(t *testing.T) {
	for _, numShards := range []int32{16, 64} {
		for n := 2; n <= 8; n++ {
			all := hosts(n)
			before := AssignShards(numShards, all)
			for leaver := range all {
				survivors := append(append([]Host{}, all[:leaver]...), all[leaver+1:]...)
				after := AssignShards(numShards, survivors)
				leaversShards, extra := 0, 0
				for s, owner := range before {
					switch {
					case owner == all[leaver].ID:
						leaversShards++
					case after[s] != owner:
						extra++
					}
				}
				require.LessOrEqual(t, extra, 2*len(survivors),
					"%d shards, %d hosts, %s leaves: %d of its shards and %d others moved", numShards, n, all[leaver].ID, leaversShards, extra)
			}
		}
	}
}
