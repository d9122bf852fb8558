package persistence

import (
	"context"
	"time"
)

// MembershipStore keeps the live hosts of a cluster that shares one database, and lets a host
// hand a shard off cleanly. Only backends that many hosts can share implement it (PostgreSQL);
// a host on any other backend is a cluster of one.
//
// Times are the database's clock, never a host's: a member is alive while its Expiry is after
// the database's now, so hosts whose clocks disagree still agree on who is alive.
type MembershipStore interface {
	// RenewMember registers m or renews its row: LastRenewal becomes the database's now and
	// Expiry now + ttl. The returned member carries the stored times.
	RenewMember(ctx context.Context, m ClusterMember, ttl time.Duration) (ClusterMember, error)
	// ListMembers returns the members whose Expiry is still ahead, sorted by HostID.
	ListMembers(ctx context.Context) ([]ClusterMember, error)
	// RemoveMember deletes hostID's row (a graceful leave) and tells the listeners.
	RemoveMember(ctx context.Context, hostID string) error
	// WatchMembers calls changed whenever a member joins or leaves (and may call it for no
	// change), until ctx ends. It returns when ctx ends or the notification channel breaks;
	// callers poll ListMembers as well, so a broken watch only slows them down.
	WatchMembers(ctx context.Context, changed func()) error
	// ReleaseShard records that the owner holding rangeID stopped serving the shard cleanly:
	// everything it acknowledged is written and nothing more will be. It does not change the
	// range_id; the next AcquireShard reports it (ShardInfo.Released). With leasesNeedGrace
	// (the owner's own takeover grace still ran: its leases could not all be renewed yet) the
	// shard is not marked released but left without an owner (ShardInfo.Owner ""), so the
	// next owner takes it at once and still applies the restart grace. A release by a host
	// that no longer holds rangeID returns a *ShardOwnershipLostError.
	ReleaseShard(ctx context.Context, shardID int32, rangeID int64, leasesNeedGrace bool) error
}

// ClusterMember is one host's membership row.
type ClusterMember struct {
	HostID          string
	HistoryAddress  string
	FrontendAddress string
	StartTime       time.Time
	LastRenewal     time.Time
	Expiry          time.Time
	// Load is the host's load report as of its last renewal, opaque to the store (the overload
	// controller's): the other hosts' expiry brakes hold while it is behind.
	Load []byte
}
