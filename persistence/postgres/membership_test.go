package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/persistence"
)

func TestMembership(t *testing.T) {
	ctx := context.Background()

	t.Run("RenewedMembersAreListedUntilTheirExpiry", func(t *testing.T) {
		t.Parallel()
		dsn, schema := newTestSchema(t)
		s := openTestStore(t, dsn, schema)
		start := time.Now().UTC().Truncate(time.Microsecond)
		b, err := s.RenewMember(ctx, persistence.ClusterMember{HostID: "b", HistoryAddress: "h-b", FrontendAddress: "f-b", StartTime: start}, time.Minute)
		require.NoError(t, err)
		require.Equal(t, time.Minute, b.Expiry.Sub(b.LastRenewal))
		// Long enough to be listed once on a loaded machine (50 ms was not), short enough to
		// see it expire.
		_, err = s.RenewMember(ctx, persistence.ClusterMember{HostID: "a", HistoryAddress: "h-a", StartTime: start}, 2*time.Second)
		require.NoError(t, err)

		members, err := s.ListMembers(ctx)
		require.NoError(t, err)
		require.Len(t, members, 2)
		require.Equal(t, "a", members[0].HostID)
		require.Equal(t, "b", members[1].HostID)
		require.Equal(t, "h-b", members[1].HistoryAddress)
		require.Equal(t, "f-b", members[1].FrontendAddress)
		require.True(t, start.Equal(members[1].StartTime))

		require.Eventually(t, func() bool { // a's row expires on the database's clock
			members, err := s.ListMembers(ctx)
			return err == nil && len(members) == 1 && members[0].HostID == "b"
		}, 10*time.Second, 10*time.Millisecond)

		require.NoError(t, s.RemoveMember(ctx, "b"))
		members, err = s.ListMembers(ctx)
		require.NoError(t, err)
		require.Empty(t, members)
	})

	t.Run("WatchersLearnOfJoinsAndLeavesInTheirSchemaOnly", func(t *testing.T) {
		t.Parallel()
		dsn, schema := newTestSchema(t)
		s := openTestStore(t, dsn, schema)
		otherDSN, otherSchema := newTestSchema(t)
		other := openTestStore(t, otherDSN, otherSchema)

		watchCtx, cancel := context.WithCancel(ctx)
		changes := make(chan struct{}, 16)
		watching := make(chan error, 1)
		go func() { watching <- s.WatchMembers(watchCtx, func() { changes <- struct{}{} }) }()
		t.Cleanup(func() { cancel(); require.NoError(t, <-watching) })

		// LISTEN takes effect at some point after the watch starts: join until it is heard.
		heard := false
		for i := 0; !heard && i < 100; i++ {
			require.NoError(t, s.RemoveMember(ctx, "a"))
			select {
			case <-changes:
				heard = true
			case <-time.After(100 * time.Millisecond):
			}
		}
		require.True(t, heard, "no notification of a leave")
		for len(changes) > 0 {
			<-changes
		}
		_, err := other.RenewMember(ctx, persistence.ClusterMember{HostID: "x"}, time.Minute)
		require.NoError(t, err)
		_, err = s.RenewMember(ctx, persistence.ClusterMember{HostID: "a"}, time.Minute)
		require.NoError(t, err)
		<-changes // a's join; x's, in another schema, is not delivered here
		_, err = s.RenewMember(ctx, persistence.ClusterMember{HostID: "a"}, time.Minute)
		require.NoError(t, err) // a renewal is not a join
		require.NoError(t, s.RemoveMember(ctx, "a"))
		<-changes
		require.Empty(t, changes)
	})

	t.Run("AcquireReportsAReleaseByTheOwnerStillHoldingTheShard", func(t *testing.T) {
		t.Parallel()
		h := newTwoHosts(t)
		a, err := h.a.AcquireShard(ctx, 1, "host-a")
		require.NoError(t, err)
		require.False(t, a.Released)
		require.NoError(t, h.a.ReleaseShard(ctx, 1, a.RangeID, false))
		b, err := h.b.AcquireShard(ctx, 1, "host-b")
		require.NoError(t, err)
		require.True(t, b.Released)

		// A release by a fenced owner fails and does not mark the shard.
		var lost *persistence.ShardOwnershipLostError
		require.ErrorAs(t, h.a.ReleaseShard(ctx, 1, a.RangeID, false), &lost)
		require.Equal(t, b.RangeID, lost.StoredRangeID)
		c, err := h.a.AcquireShard(ctx, 1, "host-a")
		require.NoError(t, err)
		require.False(t, c.Released, "host-b crashed: it never released")
	})

	t.Run("AReleaseWhoseLeasesNeedGraceLeavesTheShardOwnerlessNotReleased", func(t *testing.T) {
		t.Parallel()
		h := newTwoHosts(t)
		a, err := h.a.AcquireShard(ctx, 1, "host-a")
		require.NoError(t, err)
		require.NoError(t, h.a.ReleaseShard(ctx, 1, a.RangeID, true))
		info, err := h.b.GetShard(ctx, 1)
		require.NoError(t, err)
		require.Empty(t, info.Owner, "nobody serves it: the next owner need not wait for a release")
		require.False(t, info.Released)
		require.Equal(t, a.RangeID, info.RangeID)
		b, err := h.b.AcquireShard(ctx, 1, "host-b")
		require.NoError(t, err)
		require.False(t, b.Released, "the next owner applies the restart grace")
		require.Equal(t, "host-b", b.Owner)
	})
}

// TestPausedTransactionDoesNotBlockTakeover: a host paused between a write's pipeline and its
// COMMIT holds its shard row FOR SHARE; PostgreSQL ends that idle transaction, so another host
// can take the shard over instead of waiting for the paused one to resume, and the paused
// host's write never commits.
func TestPausedTransactionDoesNotBlockTakeover(t *testing.T) {
	dsn, schema := newTestSchema(t)
	a := openTestStore(t, dsn, schema)
	t.Cleanup(func() { _ = a.Close() })
	ctx := context.Background()
	_, err := a.AcquireShard(ctx, 1, "host-a")
	require.NoError(t, err)
	conn, err := a.writePool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, qLockShard, 1) // then host-a stops, the transaction open
	require.NoError(t, err)

	b := openTestStore(t, dsn, schema)
	t.Cleanup(func() { _ = b.Close() })
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := b.AcquireShard(actx, 1, "host-b")
	require.NoError(t, err, "the takeover waited on the paused host's lock")
	require.Equal(t, "host-b", info.Owner)
	require.Error(t, tx.Commit(ctx), "the paused host's transaction was not ended")
}
