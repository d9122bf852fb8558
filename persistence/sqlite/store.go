// Package sqlite is vigil's embedded persistence backend: one SQLite database file in WAL mode,
// on modernc.org/sqlite (pure Go, no cgo).
//
// SQLite allows one writer at a time, so the Store keeps one dedicated write connection, on
// which every write transaction runs (BEGIN IMMEDIATE, so a transaction holds the write lock from
// its first statement and never fails half-way with SQLITE_BUSY on lock upgrade), and a small
// pool of read-only connections. WAL lets those readers proceed while a write commits.
//
// Durability: synchronous=FULL on the write connection, so in WAL mode each commit fsyncs the
// WAL before it returns. An acknowledged write survives power loss. Group commit
// (persistence.GroupCommitter) is what keeps that from costing one fsync per heartbeat.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/vigilhq/vigil/common/memrelease"
	"github.com/vigilhq/vigil/persistence"
)

// Defaults for Config fields left zero.
const (
	// BusyTimeoutDefault bounds how long a connection waits for a lock held by another
	// connection (another process on the same file, or a checkpoint) before failing.
	BusyTimeoutDefault = 5 * time.Second
	// MaxReadConnsDefault caps the read pool. Reads are short; a few connections per core
	// keep the WAL readers busy without piling up memory.
	MaxReadConnsDefault = 4
	// ReadConnMaxIdleTime closes a read connection unused for that long; the pool opens one
	// again when reads need it (in well under a millisecond). A connection holds its page
	// cache (up to 2,000 KiB by default, about twice that as allocated), its prepared
	// statements and its schema: the readers a burst opened should not keep that for good.
	ReadConnMaxIdleTime = time.Minute
	// releaseMemoryTimeout bounds how long ReleaseMemory, run from memrelease's hook, waits for
	// the write connection behind the transactions in flight.
	releaseMemoryTimeout = 10 * time.Second
)

// Config selects and tunes the database file.
type Config struct {
	// Path is the database file. Its directory must exist; the file is created if missing.
	Path string
	// BusyTimeout defaults to BusyTimeoutDefault.
	BusyTimeout time.Duration
	// MaxReadConns defaults to max(MaxReadConnsDefault, GOMAXPROCS).
	MaxReadConns int
	// CheckpointInterval is how often a background connection copies the WAL into the
	// database file (see checkpointer). Zero means CheckpointIntervalDefault; negative
	// leaves checkpoints to SQLite, inside the commits on the write connection (as before).
	CheckpointInterval time.Duration
	// WALSizeLimit bounds the WAL file under a write load that never pauses: once the WAL
	// holds more than this, the next write first lets it start over (see checkpointer), and
	// a WAL that starts over is cut back to this size. Zero means WALSizeLimitDefault.
	WALSizeLimit int64
}

// Store implements persistence.Store on one SQLite file.
type Store struct {
	path   string
	logger *zap.Logger
	// writeDB has exactly one connection: every write transaction is serialized on it, which is
	// what SQLite would do anyway, but here the wait happens in database/sql (honouring ctx)
	// instead of in SQLite's busy handler.
	writeDB *sql.DB
	// writeStmts are the write path's statements, prepared once on the write connection.
	writeStmts map[string]*sql.Stmt
	// fence is the shards' range_ids as the write connection last read them (write.go).
	fence rangeFence
	// readDB is a pool of query_only connections; reads holds its hot statements.
	readDB *sql.DB
	reads  readStmts
	// taskDeletes holds the task queues' deletes of executed tasks until a WriteBatch
	// carries them, or a transaction of their own (taskdelete.go).
	taskDeletes taskDeletes
	// checkpoints copies the WAL into the database file off the write connection.
	checkpoints *checkpointer
	// maxReadConns is the read pool's size, also its number of idle connections kept.
	maxReadConns int
	// stopReleasing unregisters ReleaseMemory from memrelease; memoryReleases counts its
	// runs, for tests.
	stopReleasing  func()
	memoryReleases atomic.Int64
}

var _ persistence.Store = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path and migrates its schema to the
// version this binary knows. It refuses a database whose schema is newer than that.
func Open(ctx context.Context, cfg Config, logger *zap.Logger) (*Store, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if cfg.Path == "" {
		return nil, errors.New("sqlite: config: path is empty")
	}
	// The driver splits the DSN at the first '?', so a path containing one would be cut.
	if strings.ContainsRune(cfg.Path, '?') {
		return nil, fmt.Errorf("sqlite: config: path %q must not contain '?'", cfg.Path)
	}
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = BusyTimeoutDefault
	}
	if cfg.MaxReadConns <= 0 {
		cfg.MaxReadConns = max(MaxReadConnsDefault, runtime.GOMAXPROCS(0))
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = CheckpointIntervalDefault
	}
	if cfg.WALSizeLimit <= 0 {
		cfg.WALSizeLimit = WALSizeLimitDefault
	}

	s := &Store{path: cfg.Path, logger: logger.With(zap.String("sqlite-path", cfg.Path)), maxReadConns: cfg.MaxReadConns}
	s.taskDeletes.flush, s.taskDeletes.linger = s.flushTaskDeletes, taskDeleteLinger

	var err error
	s.writeDB, err = sql.Open("sqlite", writeDSN(cfg))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	s.writeDB.SetMaxOpenConns(1)
	s.writeDB.SetMaxIdleConns(1)
	s.writeDB.SetConnMaxLifetime(0)
	s.writeDB.SetConnMaxIdleTime(0)

	// The first connection sets journal_mode=WAL, which reads the file header: a file that is
	// not a database fails here, before any migration is attempted.
	if err := s.writeDB.PingContext(ctx); err != nil {
		_ = s.writeDB.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, describeOpenError(err))
	}
	if err := s.checkWriteConnection(ctx); err != nil {
		_ = s.writeDB.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, describeOpenError(err))
	}
	if err := migrate(ctx, s.writeDB, s.logger); err != nil {
		_ = s.writeDB.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, describeOpenError(err))
	}

	s.writeStmts, err = prepareWriteStatements(ctx, s.writeDB)
	if err != nil {
		_ = s.writeDB.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}

	s.readDB, err = sql.Open("sqlite", readDSN(cfg))
	if err != nil {
		_ = s.writeDB.Close()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", cfg.Path, err)
	}
	s.readDB.SetMaxOpenConns(cfg.MaxReadConns)
	s.readDB.SetMaxIdleConns(cfg.MaxReadConns)
	s.readDB.SetConnMaxIdleTime(ReadConnMaxIdleTime)
	if err := s.readDB.PingContext(ctx); err != nil {
		_ = s.closeConnections()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", cfg.Path, err)
	}
	if s.reads, err = prepareReadStatements(ctx, s.readDB); err != nil {
		_ = s.closeConnections()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", cfg.Path, err)
	}

	if cfg.CheckpointInterval < 0 {
		s.stopReleasing = memrelease.OnRelease(s.releaseMemoryHook)
		return s, nil
	}
	ckptDB, err := sql.Open("sqlite", checkpointDSN(cfg))
	if err == nil {
		ckptDB.SetMaxOpenConns(1)
		ckptDB.SetMaxIdleConns(1)
		ckptDB.SetConnMaxLifetime(0)
		ckptDB.SetConnMaxIdleTime(0)
		if err = ckptDB.PingContext(ctx); err != nil {
			_ = ckptDB.Close()
		}
	}
	if err != nil {
		_ = s.closeConnections()
		return nil, fmt.Errorf("sqlite: open %s for checkpoints: %w", cfg.Path, err)
	}
	s.checkpoints = startCheckpointer(ckptDB, cfg.CheckpointInterval, walFrames(cfg.WALSizeLimit), s.logger)
	s.stopReleasing = memrelease.OnRelease(s.releaseMemoryHook)
	return s, nil
}

func writeDSN(cfg Config) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	// The background checkpointer copies the WAL into the database file; a commit on this
	// connection only appends to the WAL.
	if cfg.CheckpointInterval >= 0 {
		q.Add("_pragma", "wal_autocheckpoint(0)")
	}
	// A WAL that starts over is truncated to this size, so one burst does not leave a
	// WAL file of its own size on disk for good.
	q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", cfg.WALSizeLimit))
	// Referential integrity is kept by the write path (a delete removes its dependents in the
	// same transaction); foreign-key checks would add an index probe to every collection and
	// task insert on the hot path.
	q.Add("_pragma", "foreign_keys(0)")
	q.Set("_txlock", "immediate")
	return cfg.Path + "?" + q.Encode()
}

func checkpointQuery(cfg Config) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "wal_autocheckpoint(0)")
	return q.Encode()
}

func readDSN(cfg Config) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "query_only(1)")
	return cfg.Path + "?" + q.Encode()
}

// checkWriteConnection verifies that the pragmas durability depends on took effect: SQLite
// ignores journal_mode=WAL silently on some filesystems and for in-memory databases.
func (s *Store) checkWriteConnection(ctx context.Context) error {
	var mode string
	if err := s.writeDB.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal_mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, want wal (is the path on a filesystem that supports shared memory?)", mode)
	}
	var sync int
	if err := s.writeDB.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return fmt.Errorf("read synchronous: %w", err)
	}
	if sync != 2 { // FULL
		return fmt.Errorf("synchronous is %d, want 2 (FULL)", sync)
	}
	return nil
}

// describeOpenError turns the driver's terse "file is not a database" into something an
// operator can act on.
func describeOpenError(err error) error {
	if isNotADatabase(err) {
		return fmt.Errorf("the file is not a SQLite database or is corrupt: %w", err)
	}
	return err
}

// Close stops the checkpointer and closes the connection pools. A write transaction in flight
// finishes first; the last connection to close checkpoints the WAL.
func (s *Store) Close() error {
	if s.stopReleasing != nil {
		s.stopReleasing()
	}
	var errs []error
	if s.checkpoints != nil {
		errs = append(errs, s.checkpoints.close())
	}
	errs = append(errs, s.closeConnections())
	return errors.Join(errs...)
}

// closeConnections closes the read pool with its statements and the write connection with
// its statements; Open calls it when a later step fails, Close last.
func (s *Store) closeConnections() error {
	errs := []error{s.reads.close(), s.readDB.Close()}
	for _, st := range s.writeStmts {
		errs = append(errs, st.Close())
	}
	errs = append(errs, s.writeDB.Close())
	return errors.Join(errs...)
}

// InitClusterMetadata implements persistence.ClusterStore.
func (s *Store) InitClusterMetadata(ctx context.Context, numShards int32) (int32, error) {
	if numShards <= 0 {
		return 0, fmt.Errorf("sqlite: init cluster metadata: shard count must be positive, got %d", numShards)
	}
	var stored int32
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO cluster_metadata (id, num_shards) VALUES (1, ?) ON CONFLICT (id) DO NOTHING`,
			numShards); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT num_shards FROM cluster_metadata WHERE id = 1`).Scan(&stored)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: init cluster metadata: %w", err)
	}
	return stored, nil
}

// AcquireShard implements persistence.ShardStore.
func (s *Store) AcquireShard(ctx context.Context, shardID int32, owner string) (persistence.ShardInfo, error) {
	info := persistence.ShardInfo{ShardID: shardID}
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		s.fence.forget(shardID) // read again by the next batch, whether this commits or not
		return tx.QueryRowContext(ctx,
			`INSERT INTO shards (shard_id, range_id, owner) VALUES (?, 1, ?)
			 ON CONFLICT (shard_id) DO UPDATE SET range_id = shards.range_id + 1, owner = excluded.owner
			 RETURNING range_id, owner`,
			shardID, owner).Scan(&info.RangeID, &info.Owner)
	})
	if err != nil {
		return persistence.ShardInfo{}, fmt.Errorf("sqlite: acquire shard %d for %q: %w", shardID, owner, err)
	}
	return info, nil
}

// GetShard implements persistence.ShardStore.
func (s *Store) GetShard(ctx context.Context, shardID int32) (persistence.ShardInfo, error) {
	info := persistence.ShardInfo{ShardID: shardID}
	err := s.readDB.QueryRowContext(ctx, `SELECT range_id, owner FROM shards WHERE shard_id = ?`, shardID).
		Scan(&info.RangeID, &info.Owner)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.ShardInfo{}, &persistence.NotFoundError{Msg: fmt.Sprintf("shard %d not found", shardID)}
	}
	if err != nil {
		return persistence.ShardInfo{}, fmt.Errorf("sqlite: get shard %d: %w", shardID, err)
	}
	return info, nil
}

// inWriteTx runs fn in a write transaction on the write connection and commits it.
func (s *Store) inWriteTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	if s.checkpoints != nil && s.checkpoints.restartWanted.CompareAndSwap(true, false) {
		s.letWALRestart(ctx)
	}
	tx, err := s.writeDB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
