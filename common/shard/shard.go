// Package shard maps executions to shards.
package shard

import "hash/fnv"

// ForKey returns the shard, in [1, numShards], that owns the business ID in a namespace. The
// mapping is part of the stored data's layout: it must never change for a given numShards,
// which is why a cluster refuses to start with a shard count other than the stored one.
func ForKey(namespaceID, businessID string, numShards int32) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespaceID))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(businessID))
	return int32(h.Sum32()%uint32(numShards)) + 1
}
