// Package postgres is vigil's shared persistence backend: many history hosts on one
// PostgreSQL database, through pgx and its connection pool.
//
// Fencing across hosts: a host owns a shard while the range_id it acquired is the one stored in
// the shard's row. Every WriteBatch transaction reads that row FOR SHARE before its first write
// to the shard and keeps the lock until it commits; AcquireShard updates the row, which needs a
// lock that conflicts with FOR SHARE. So an acquisition waits for the writes in flight under
// the old range_id, and every write that starts after it sees the new range_id and is refused.
//
// Isolation is READ COMMITTED. Optimistic concurrency does not need more: each conditional
// UPDATE/DELETE re-checks db_version on the newest row version after waiting for a concurrent
// writer of that row, so two batches can never both move an execution from the same version.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/persistence"
)

// MaxConnsDefault caps the pool when Config.MaxConns is zero. A host needs few: reads are
// short, and WriteBatch has connections of its own (writeConns).
const MaxConnsDefault = 8

// Config selects the database and schema.
type Config struct {
	// DSN is a libpq connection string or URL, for example
	// postgres://vigil@db:5432/vigil?sslmode=verify-full. Session settings such as
	// statement_timeout may be added as parameters.
	DSN string
	// MaxConns caps the connections for everything but WriteBatch, which has writeConns (2)
	// more of its own. It defaults to MaxConnsDefault.
	MaxConns int32
	// Schema holds vigil's tables; it is created if missing and becomes every connection's
	// search_path. Empty means the DSN's search_path (usually public).
	Schema string
}

// Store implements persistence.Store on PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
	// writePool serves WriteBatch alone, so that group commit never queues for a connection
	// behind reads: when reads pile up (a burst of cache misses), heartbeats still commit.
	writePool *pgxpool.Pool
	logger    *zap.Logger

	testHooks testHooks
}

// testHooks let tests stop a write transaction at a chosen point. They are nil outside tests.
type testHooks struct {
	// afterFence runs inside WriteBatch once a shard's row is locked and its range_id read,
	// while the transaction holding the lock is still open: on the pipelined path after the
	// pipeline's answer and before COMMIT, on the write-by-write path before the shard's
	// first write.
	afterFence func(shardID int32)
	// fellBack runs when a pipelined attempt was rolled back to run the batch write by write.
	fellBack func()
	// writeByWrite skips the pipelined attempt: benchmarks compare the two paths.
	writeByWrite bool
}

var _ persistence.Store = (*Store)(nil)

// Open connects to cfg.DSN and migrates the schema to the version this binary knows. It
// refuses a schema that is newer than that.
func Open(ctx context.Context, cfg Config, logger *zap.Logger) (*Store, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if cfg.DSN == "" {
		return nil, errors.New("postgres: config: DSN is empty")
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("postgres: config: max conns must not be negative, got %d", cfg.MaxConns)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = MaxConnsDefault
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		// The parse error may quote the DSN, password included; say only what failed.
		return nil, errors.New("postgres: config: DSN is not a valid connection string or URL")
	}
	poolCfg.MaxConns = cfg.MaxConns
	if cfg.Schema != "" {
		// Only the one schema: a table missing from it must be an error, not a silent read
		// of a same-named table in public.
		poolCfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	}
	if _, set := poolCfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		// A host paused (SIGSTOP, a frozen VM) inside a transaction, between a write's
		// pipeline and its COMMIT, would hold its shard rows' locks for the whole pause, and
		// the hosts taking its shards over would wait on them in AcquireShard. PostgreSQL ends
		// such a session after this long: its write fails, unacknowledged, and the locks go.
		poolCfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(IdleInTransactionTimeout.Milliseconds(), 10)
	}
	logger = logger.With(zap.String("postgres-host", poolCfg.ConnConfig.Host),
		zap.String("postgres-database", poolCfg.ConnConfig.Database), zap.String("postgres-schema", cfg.Schema))

	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	where := fmt.Sprintf("%s:%d/%s", poolCfg.ConnConfig.Host, poolCfg.ConnConfig.Port, poolCfg.ConnConfig.Database)
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", where, err)
	}
	if err := migrate(ctx, pool, cfg.Schema, logger); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", where, err)
	}
	writeCfg := poolCfg.Copy()
	writeCfg.MaxConns = writeConns
	writeCfg.MinConns = 0
	writePool, err := pgxpool.NewWithConfig(ctx, writeCfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", where, err)
	}
	return &Store{pool: pool, writePool: writePool, logger: logger}, nil
}

// IdleInTransactionTimeout is the idle_in_transaction_session_timeout of vigil's sessions unless
// the DSN sets one: within the membership TTL, so that a paused host's locks do not outlast
// its membership.
const IdleInTransactionTimeout = 3 * time.Second

// writeConns is the size of the pool that serves WriteBatch, and how many batches the group
// committer runs at once (MaxConcurrentBatches): the next batch's pipeline overlaps the
// previous batch's COMMIT.
const writeConns = 2

// Close closes the pools, waiting for connections in use to be returned.
func (s *Store) Close() error {
	s.writePool.Close()
	s.pool.Close()
	return nil
}

// InitClusterMetadata implements persistence.ClusterStore.
func (s *Store) InitClusterMetadata(ctx context.Context, numShards int32) (int32, error) {
	if numShards <= 0 {
		return 0, fmt.Errorf("postgres: init cluster metadata: shard count must be positive, got %d", numShards)
	}
	// Two statements, not one: the read must take a snapshot after the insert, so that it sees
	// the row a concurrent first caller committed while the insert waited for it.
	if _, err := s.pool.Exec(ctx,
		`INSERT INTO cluster_metadata (id, num_shards) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`,
		numShards); err != nil {
		return 0, fmt.Errorf("postgres: init cluster metadata: %w", err)
	}
	var stored int32
	if err := s.pool.QueryRow(ctx, `SELECT num_shards FROM cluster_metadata WHERE id = 1`).Scan(&stored); err != nil {
		return 0, fmt.Errorf("postgres: init cluster metadata: %w", err)
	}
	return stored, nil
}

// AcquireShard implements persistence.ShardStore. The upsert is one statement: concurrent
// acquisitions, from any host, queue on the row and each gets its own increment. The released
// flag is read under the same row lock first, so it is the previous owner's, not a racer's.
func (s *Store) AcquireShard(ctx context.Context, shardID int32, owner string) (persistence.ShardInfo, error) {
	info := persistence.ShardInfo{ShardID: shardID}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT released FROM shards WHERE shard_id = $1 FOR UPDATE`, shardID).
			Scan(&info.Released)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return tx.QueryRow(ctx,
			`INSERT INTO shards (shard_id, range_id, owner) VALUES ($1, 1, $2)
			 ON CONFLICT (shard_id) DO UPDATE SET range_id = shards.range_id + 1, owner = excluded.owner, released = FALSE
			 RETURNING range_id, owner`,
			shardID, owner).Scan(&info.RangeID, &info.Owner)
	})
	if err != nil {
		return persistence.ShardInfo{}, fmt.Errorf("postgres: acquire shard %d for %q: %w", shardID, owner, err)
	}
	return info, nil
}

// GetShard implements persistence.ShardStore.
func (s *Store) GetShard(ctx context.Context, shardID int32) (persistence.ShardInfo, error) {
	info := persistence.ShardInfo{ShardID: shardID}
	err := s.pool.QueryRow(ctx, `SELECT range_id, owner, released FROM shards WHERE shard_id = $1`, shardID).
		Scan(&info.RangeID, &info.Owner, &info.Released)
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.ShardInfo{}, &persistence.NotFoundError{Msg: fmt.Sprintf("shard %d not found", shardID)}
	}
	if err != nil {
		return persistence.ShardInfo{}, fmt.Errorf("postgres: get shard %d: %w", shardID, err)
	}
	return info, nil
}
