package membership

import (
	"cmp"
	"slices"
)

// AssignShards maps every shard 1..numShards to the ID of the host that owns it among hosts.
//
// Plain rendezvous hashing balances only on average; with 16 shards over 3 hosts it can give
// one host twice another's load. So the assignment is rendezvous hashing with exact quotas:
// every (shard, host) pair is ranked by its weight, and pairs are taken best first while the
// host has room. Each host gets numShards/len(hosts) shards, and the remainder go one each to
// the hosts that reach for them first; so every host is within one shard of every other.
// Every host computes the same assignment from the same member list.
//
// A leave or join moves the leaver's (or joiner's share of) shards, plus the few shards
// whose preferred host gains or loses room as the quotas change.
func AssignShards(numShards int32, hosts []Host) map[int32]string {
	out := make(map[int32]string, numShards)
	if len(hosts) == 0 || numShards <= 0 {
		return out
	}
	type pair struct {
		shard  int32
		host   int
		weight uint64
	}
	pairs := make([]pair, 0, int(numShards)*len(hosts))
	for s := int32(1); s <= numShards; s++ {
		key := ShardKey(s)
		for i, h := range hosts {
			pairs = append(pairs, pair{shard: s, host: i, weight: Weight(h.ID, key)})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(b.weight, a.weight); c != 0 {
			return c
		}
		if c := cmp.Compare(hosts[a.host].ID, hosts[b.host].ID); c != 0 {
			return c
		}
		return cmp.Compare(a.shard, b.shard)
	})
	base := int(numShards) / len(hosts)
	extra := int(numShards) % len(hosts)
	counts := make([]int, len(hosts))
	for _, p := range pairs {
		if _, done := out[p.shard]; done {
			continue
		}
		switch {
		case counts[p.host] < base:
		case counts[p.host] == base && extra > 0:
			extra--
		default:
			continue
		}
		counts[p.host]++
		out[p.shard] = hosts[p.host].ID
	}
	return out
}
