package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

var _ persistence.MembershipStore = (*Store)(nil)

// membershipChannel is the NOTIFY channel of joins and leaves. Its payload is the schema, so
// clusters in different schemas of one database ignore each other's notifications.
const membershipChannel = "vigil_membership"

// RenewMember implements persistence.MembershipStore. A first registration (or one after the
// row expired) notifies the other hosts; a plain renewal does not, they poll.
func (s *Store) RenewMember(ctx context.Context, m persistence.ClusterMember, ttl time.Duration) (persistence.ClusterMember, error) {
	if ttl <= 0 {
		return m, fmt.Errorf("postgres: renew member %q: ttl must be positive, got %s", m.HostID, ttl)
	}
	var joined bool
	err := s.pool.QueryRow(ctx,
		`WITH prev AS (SELECT expiry > now() AS alive FROM cluster_membership WHERE host_id = $1)
		 INSERT INTO cluster_membership AS c (host_id, history_address, frontend_address, start_time, last_renewal, expiry, load)
		 VALUES ($1, $2, $3, $4, now(), now() + $5::interval, $6)
		 ON CONFLICT (host_id) DO UPDATE SET history_address = excluded.history_address,
		     frontend_address = excluded.frontend_address, start_time = excluded.start_time,
		     last_renewal = excluded.last_renewal, expiry = excluded.expiry, load = excluded.load
		 RETURNING c.last_renewal, c.expiry, NOT COALESCE((SELECT alive FROM prev), FALSE)`,
		m.HostID, m.HistoryAddress, m.FrontendAddress, m.StartTime.UTC(), ttl, sqlcommon.NonNil(m.Load)).Scan(&m.LastRenewal, &m.Expiry, &joined)
	if err != nil {
		return m, fmt.Errorf("postgres: renew member %q: %w", m.HostID, err)
	}
	if joined {
		s.notifyMembership(ctx)
	}
	return m, nil
}

// ListMembers implements persistence.MembershipStore.
func (s *Store) ListMembers(ctx context.Context) ([]persistence.ClusterMember, error) {
	rows, err := s.pool.Query(ctx,
		`SELECT host_id, history_address, frontend_address, start_time, last_renewal, expiry, load
		 FROM cluster_membership WHERE expiry > now() ORDER BY host_id`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list members: %w", err)
	}
	members, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (persistence.ClusterMember, error) {
		var m persistence.ClusterMember
		err := row.Scan(&m.HostID, &m.HistoryAddress, &m.FrontendAddress, &m.StartTime, &m.LastRenewal, &m.Expiry, &m.Load)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list members: %w", err)
	}
	return members, nil
}

// RemoveMember implements persistence.MembershipStore.
func (s *Store) RemoveMember(ctx context.Context, hostID string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM cluster_membership WHERE host_id = $1`, hostID); err != nil {
		return fmt.Errorf("postgres: remove member %q: %w", hostID, err)
	}
	s.notifyMembership(ctx)
	return nil
}

// notifyMembership is best effort: listeners also poll.
func (s *Store) notifyMembership(ctx context.Context) {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, current_schema())`, membershipChannel); err != nil {
		s.logger.Warn("postgres: notify membership change", zap.Error(err))
	}
}

// WatchMembers implements persistence.MembershipStore on LISTEN. It holds a connection of its
// own, outside the pool, so that it never takes one from the writers.
func (s *Store) WatchMembers(ctx context.Context, changed func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("postgres: watch members: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	var schema string
	if err := conn.QueryRow(ctx, `SELECT COALESCE(current_schema(), '')`).Scan(&schema); err != nil {
		return fmt.Errorf("postgres: watch members: %w", err)
	}
	if _, err := conn.Exec(ctx, `LISTEN `+membershipChannel); err != nil {
		return fmt.Errorf("postgres: watch members: %w", err)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("postgres: watch members: %w", err)
		}
		if n.Payload == schema {
			changed()
		}
	}
}

// ReleaseShard implements persistence.MembershipStore. The UPDATE waits for the writes in
// flight under rangeID (they hold the row FOR SHARE), so a release is recorded after them.
func (s *Store) ReleaseShard(ctx context.Context, shardID int32, rangeID int64, leasesNeedGrace bool) error {
	tag, err := s.pool.Exec(ctx,
		`UPDATE shards SET released = NOT $3, owner = CASE WHEN $3 THEN '' ELSE owner END WHERE shard_id = $1 AND range_id = $2`,
		shardID, rangeID, leasesNeedGrace)
	if err != nil {
		return fmt.Errorf("postgres: release shard %d: %w", shardID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	lost := &persistence.ShardOwnershipLostError{ShardID: shardID, RangeID: rangeID}
	if info, err := s.GetShard(ctx, shardID); err == nil {
		lost.StoredRangeID = info.RangeID
	}
	return lost
}
