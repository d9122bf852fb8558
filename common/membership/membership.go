// Package membership names the live hosts of a cluster and decides, by rendezvous hashing,
// which of them owns a key: a history shard or a matching task queue. Every host computes the
// same answer from the same member list, so no host has to ask another who owns what.
package membership

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"time"
)

// Host is one live vigil process.
type Host struct {
	// ID names the host; it is unique within the cluster and stable across its restarts.
	ID string
	// HistoryAddress serves the history (and matching) RPCs of the host.
	HistoryAddress string
	// FrontendAddress serves the public WorkflowService.
	FrontendAddress string
	// StartTime is when the host process started.
	StartTime time.Time
	// LastRenewal is when the host last renewed its membership.
	LastRenewal time.Time
	// Expiry is when the host stops being a member unless it renews first.
	Expiry time.Time
}

// Monitor is this host's view of the cluster.
type Monitor interface {
	// Self returns this host.
	Self() Host
	// Members returns the live hosts sorted by ID.
	Members() []Host
	// Subscribe returns a channel that receives after every change of Members (sends are
	// coalesced and never block the monitor) and a function that ends the subscription.
	Subscribe() (<-chan struct{}, func())
}

// Owner returns the host with the highest rendezvous weight for key among hosts; false if
// hosts is empty. A host that joins or leaves changes the owner of about 1/N of the keys.
func Owner(key string, hosts []Host) (Host, bool) {
	var (
		best   Host
		bestW  uint64
		picked bool
	)
	for _, h := range hosts {
		w := Weight(h.ID, key)
		if !picked || w > bestW || (w == bestW && h.ID < best.ID) {
			best, bestW, picked = h, w, true
		}
	}
	return best, picked
}

// Weight is the rendezvous weight of (hostID, key): FNV-1a mixed by the splitmix64 finalizer,
// so that similar host IDs ("vigil-1", "vigil-2") do not get correlated weights.
func Weight(hostID, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(hostID))
	h.Write([]byte{0})
	h.Write([]byte(key))
	z := h.Sum64()
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// TaskQueueKey is the rendezvous key of a matching queue.
func TaskQueueKey(namespaceID, taskQueue string) string {
	return "tq\x00" + namespaceID + "\x00" + taskQueue
}

// ShardKey is the rendezvous key of a history shard.
func ShardKey(shardID int32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(shardID))
	return "shard\x00" + string(b[:])
}

// Static is a Monitor whose members never change: a single host on SQLite, or a test.
type Static struct {
	self    Host
	members []Host
}

// NewStatic returns a monitor of self and others, all members for good.
func NewStatic(self Host, others ...Host) *Static {
	members := append([]Host{self}, others...)
	slices.SortFunc(members, func(a, b Host) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return &Static{self: self, members: members}
}

// Self implements Monitor.
func (s *Static) Self() Host { return s.self }

// Members implements Monitor.
func (s *Static) Members() []Host { return slices.Clone(s.members) }

// Subscribe implements Monitor; the channel never receives.
func (s *Static) Subscribe() (<-chan struct{}, func()) {
	return make(chan struct{}), func() {}
}
