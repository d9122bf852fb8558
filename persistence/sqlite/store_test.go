package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
	"github.com/vigilhq/vigil/persistence/persistencetest"
)

func openTestStore(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Path: path}, zaptest.NewLogger(t))
	require.NoError(t, err)
	return s
}

func TestStoreContract(t *testing.T) {
	persistencetest.RunStoreSuite(t, func(t *testing.T) persistence.Store {
		return openTestStore(t, filepath.Join(t.TempDir(), "vigil.db"))
	})
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("MigrationsAreIdempotentAcrossReopen", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "vigil.db")
		for range 3 {
			s := openTestStore(t, path)
			var versions, latest int
			require.NoError(t, s.readDB.QueryRowContext(ctx, `SELECT COUNT(*), MAX(version) FROM schema_version`).Scan(&versions, &latest))
			require.Equal(t, LatestSchemaVersion(), latest)
			require.Equal(t, LatestSchemaVersion(), versions, "each migration recorded once")
			require.NoError(t, s.Close())
		}
	})

	t.Run("DataSurvivesCloseAndReopen", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "vigil.db")
		s := openTestStore(t, path)
		shard, err := s.AcquireShard(ctx, 1, "host-a")
		require.NoError(t, err)
		k := persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: "w", RunID: "r"}
		at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
		w := &persistence.ExecutionWrite{
			ShardID: 1, RangeID: shard.RangeID, Mode: persistence.WriteModeCreate, Key: k, NextDBVersion: 1,
			State: []byte("s"), Lifecycle: persistence.LifecycleRunning,
			CollectionPuts: []persistence.CollectionEntry{{Collection: "c", Key: "k", Value: []byte("v")}},
			TimerTasks:     []*persistence.TimerTask{{ShardID: 1, TaskID: 1, VisibilityTime: at, Execution: k, Payload: []byte("p")}},
		}
		results, err := s.WriteBatch(ctx, []*persistence.ExecutionWrite{w})
		require.NoError(t, err)
		require.NoError(t, results[0])
		n, err := s.InitClusterMetadata(ctx, 8)
		require.NoError(t, err)
		require.Equal(t, int32(8), n)
		require.NoError(t, s.Close())

		s = openTestStore(t, path)
		defer s.Close()
		rec, err := s.GetExecution(ctx, 1, k)
		require.NoError(t, err)
		require.Equal(t, []byte("s"), rec.State)
		require.Len(t, rec.Collections, 1)
		timers, err := s.GetTimerTasks(ctx, persistence.GetTimerTasksRequest{ShardID: 1, Before: at.Add(time.Second), PageSize: 10})
		require.NoError(t, err)
		require.Len(t, timers, 1)
		require.Equal(t, at, timers[0].VisibilityTime)
		info, err := s.GetShard(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, shard, info)
		n, err = s.InitClusterMetadata(ctx, 4)
		require.NoError(t, err)
		require.Equal(t, int32(8), n)
	})

	t.Run("NewerSchemaIsRefused", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "vigil.db")
		s := openTestStore(t, path)
		_, err := s.writeDB.ExecContext(ctx, `INSERT INTO schema_version (version, name) VALUES (?, 'from_the_future.sql')`,
			LatestSchemaVersion()+1)
		require.NoError(t, err)
		require.NoError(t, s.Close())

		_, err = Open(ctx, Config{Path: path}, zaptest.NewLogger(t))
		require.ErrorContains(t, err, fmt.Sprintf("schema version %d is newer than this binary supports (%d)",
			LatestSchemaVersion()+1, LatestSchemaVersion()))
	})

	t.Run("GarbageFileIsRefused", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "vigil.db")
		garbage := make([]byte, 8192)
		for i := range garbage {
			garbage[i] = byte(i*7 + 3)
		}
		require.NoError(t, os.WriteFile(path, garbage, 0o600))
		_, err := Open(ctx, Config{Path: path}, zaptest.NewLogger(t))
		require.ErrorContains(t, err, "not a SQLite database or is corrupt")
		require.ErrorContains(t, err, path)
	})

	t.Run("CorruptDatabaseIsRefused", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "vigil.db")
		s := openTestStore(t, path)
		require.NoError(t, s.Close())
		// Keep the header, smash the pages holding the schema.
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		for i := 100; i < len(data); i++ {
			data[i] = 0xA5
		}
		require.NoError(t, os.WriteFile(path, data, 0o600))
		_, err = Open(ctx, Config{Path: path}, zaptest.NewLogger(t))
		require.ErrorContains(t, err, "not a SQLite database or is corrupt")
		require.ErrorContains(t, err, path)
	})

	t.Run("MissingDirectoryIsAClearError", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "no", "such", "dir", "vigil.db")
		_, err := Open(ctx, Config{Path: path}, zaptest.NewLogger(t))
		require.ErrorContains(t, err, path)
	})

	t.Run("EmptyPathIsRefused", func(t *testing.T) {
		t.Parallel()
		_, err := Open(ctx, Config{}, nil)
		require.ErrorContains(t, err, "path is empty")
	})

	t.Run("DurabilitySettingsApplied", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t, filepath.Join(t.TempDir(), "vigil.db"))
		defer s.Close()
		var mode string
		var sync int
		require.NoError(t, s.writeDB.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode))
		require.NoError(t, s.writeDB.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync))
		require.Equal(t, "wal", mode)
		require.Equal(t, 2, sync, "synchronous=FULL")

		_, err := s.readDB.ExecContext(ctx, `DELETE FROM shards`)
		require.Error(t, err, "read connections are query_only")
	})
}

// TestFenceSeesAnotherConnectionsAcquire checks that a store refuses its host's writes once
// the shard was taken through another connection to the same file, though its last write
// read the shard's range_id and keeps it between transactions.
func TestFenceSeesAnotherConnectionsAcquire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vigil.db")
	a := openTestStore(t, path)
	defer a.Close()
	shard, err := a.AcquireShard(ctx, 1, "host-a")
	require.NoError(t, err)
	k := persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: "w", RunID: "r"}
	write := func(mode persistence.WriteMode, version int64) error {
		w := &persistence.ExecutionWrite{
			ShardID: 1, RangeID: shard.RangeID, Mode: mode, Key: k, PrevDBVersion: version - 1, NextDBVersion: version,
			State: []byte("s"), Lifecycle: persistence.LifecycleRunning,
		}
		results, err := a.WriteBatch(ctx, []*persistence.ExecutionWrite{w})
		require.NoError(t, err)
		return results[0]
	}
	require.NoError(t, write(persistence.WriteModeCreate, 1))
	require.NoError(t, write(persistence.WriteModeUpdate, 2))

	b := openTestStore(t, path)
	defer b.Close()
	stolen, err := b.AcquireShard(ctx, 1, "host-b")
	require.NoError(t, err)

	var lost *persistence.ShardOwnershipLostError
	require.ErrorAs(t, write(persistence.WriteModeUpdate, 3), &lost)
	require.Equal(t, persistence.ShardOwnershipLostError{ShardID: 1, RangeID: shard.RangeID, StoredRangeID: stolen.RangeID}, *lost)
	rec, err := a.GetExecution(ctx, 1, k)
	require.NoError(t, err)
	require.Equal(t, int64(2), rec.DBVersion, "the fenced write changed nothing")
}

// TestStateWriteCostIndependentOfCollectionSize checks the point of storing collection entries
// as rows: a heartbeat (a state-only update) of a worker with 10,000 bound activities changes
// as many rows and writes as many WAL bytes as one with none.
func TestStateWriteCostIndependentOfCollectionSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vigil.db")
	// No background checkpointer: a checkpoint that copies the whole WAL lets the next
	// commit rewrite the file from its start, and the WAL's size would not grow by the
	// bytes that commit wrote.
	s, err := Open(ctx, Config{Path: path, CheckpointInterval: -1}, zaptest.NewLogger(t))
	require.NoError(t, err)
	defer s.Close()

	// Pin the write connection so total_changes() and the WAL are observed on the connection
	// that writes, and stop SQLite's own checkpoints from rewinding the WAL mid-measurement.
	conn, err := s.writeDB.Conn(ctx)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`)
	require.NoError(t, err)
	require.NoError(t, conn.Close())

	shard, err := s.AcquireShard(ctx, 1, "host-a")
	require.NoError(t, err)
	small := persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: "worker-small", RunID: "r"}
	large := persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: "worker-large", RunID: "r"}
	create := func(k persistence.ExecutionKey, entries int) *persistence.ExecutionWrite {
		w := &persistence.ExecutionWrite{
			ShardID: 1, RangeID: shard.RangeID, Mode: persistence.WriteModeCreate, Key: k, NextDBVersion: 1,
			State: make([]byte, 200), Lifecycle: persistence.LifecycleRunning,
		}
		for i := range entries {
			w.CollectionPuts = append(w.CollectionPuts, persistence.CollectionEntry{
				Collection: "bound", Key: fmt.Sprintf("activity-%05d", i), Value: make([]byte, 64),
			})
		}
		return w
	}
	results, err := s.WriteBatch(ctx, []*persistence.ExecutionWrite{create(small, 0), create(large, 10_000)})
	require.NoError(t, err)
	require.NoError(t, results[0])
	require.NoError(t, results[1])

	measure := func(k persistence.ExecutionKey, prev int64) (rowsChanged, walBytes int64) {
		before := writeCounters(t, s, path)
		w := &persistence.ExecutionWrite{
			ShardID: 1, RangeID: shard.RangeID, Mode: persistence.WriteModeUpdate, Key: k,
			PrevDBVersion: prev, NextDBVersion: prev + 1, State: make([]byte, 200), Lifecycle: persistence.LifecycleRunning,
		}
		results, err := s.WriteBatch(ctx, []*persistence.ExecutionWrite{w})
		require.NoError(t, err)
		require.NoError(t, results[0])
		after := writeCounters(t, s, path)
		return after.changes - before.changes, after.walBytes - before.walBytes
	}
	for v := int64(1); v <= 3; v++ {
		smallRows, smallWAL := measure(small, v)
		largeRows, largeWAL := measure(large, v)
		t.Logf("state-only update: 0 entries: %d rows, %d WAL bytes; 10,000 entries: %d rows, %d WAL bytes",
			smallRows, smallWAL, largeRows, largeWAL)
		require.Equal(t, int64(1), smallRows)
		require.Equal(t, smallRows, largeRows)
		require.Equal(t, smallWAL, largeWAL, "the same pages are written whatever the collection size")
	}
	rec, err := s.GetExecution(ctx, 1, large)
	require.NoError(t, err)
	require.Len(t, rec.Collections, 10_000)
}

type counters struct{ changes, walBytes int64 }

func writeCounters(t testing.TB, s *Store, path string) counters {
	t.Helper()
	var c counters
	require.NoError(t, s.writeDB.QueryRowContext(context.Background(), `SELECT total_changes()`).Scan(&c.changes))
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	c.walBytes = fi.Size()
	return c
}

// TestMigrationKeepsTheData: a database written by schema version 1 keeps its collection
// entries and current-execution rows through migration 2, which rebuilds those tables.
func TestMigrationKeepsTheData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vigil.db")
	ms, err := sqlcommon.ReadMigrations(schemaFS)
	require.NoError(t, err)
	require.Equal(t, 1, ms[0].Version)

	// A database as a binary that knew only version 1 left it.
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	for _, stmt := range []string{
		ms[0].SQL,
		`CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL)`,
		`INSERT INTO schema_version (version, name) VALUES (1, 'initial')`,
		`INSERT INTO shards (shard_id, range_id, owner) VALUES (1, 1, 'old-host')`,
		`INSERT INTO executions (namespace_id, archetype_id, business_id, run_id, shard_id, db_version, lifecycle, state)
			VALUES ('ns', 1, 'w', 'r', 1, 1, 0, x'73')`,
		`INSERT INTO current_executions (namespace_id, archetype_id, business_id, shard_id, run_id, lifecycle)
			VALUES ('ns', 1, 'w', 1, 'r', 0)`,
		`INSERT INTO collection_entries (namespace_id, archetype_id, business_id, run_id, collection, entry_key, value)
			VALUES ('ns', 1, 'w', 'r', 'bound', 'a1', x'01'), ('ns', 1, 'w', 'r', 'bound', 'a2', x'02')`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, db.Close())

	s := openTestStore(t, path)
	defer s.Close()
	k := persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: "w", RunID: "r"}
	rec, err := s.GetExecution(ctx, 1, k)
	require.NoError(t, err)
	require.Equal(t, []persistence.CollectionEntry{
		{Collection: "bound", Key: "a1", Value: []byte{1}}, {Collection: "bound", Key: "a2", Value: []byte{2}},
	}, rec.Collections)
	current, err := s.GetCurrentExecution(ctx, 1, k.CurrentKey())
	require.NoError(t, err)
	require.Equal(t, "r", current.RunID)

	var withoutRowID int
	require.NoError(t, s.readDB.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('collection_entries', 'current_executions') AND sql LIKE '%WITHOUT ROWID%'`).
		Scan(&withoutRowID))
	require.Equal(t, 2, withoutRowID)
}

// TestMigrationBackfillsVisibility: executions written by a binary that knew schema 4 get
// visibility records after the migration to 5 and the backfill.
func TestMigrationBackfillsVisibility(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vigil.db")
	ms, err := sqlcommon.ReadMigrations(schemaFS)
	require.NoError(t, err)
	require.Equal(t, 5, ms[4].Version)

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	stmts := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL)`}
	for _, m := range ms[:4] {
		stmts = append(stmts, m.SQL, fmt.Sprintf(`INSERT INTO schema_version (version, name) VALUES (%d, %q)`, m.Version, m.Name))
	}
	for _, stmt := range append(stmts, persistencetest.PreVisibilityExecutions) {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, db.Close())

	s := openTestStore(t, path)
	defer s.Close()
	persistencetest.RequireBackfilledAfterMigration(t, s)
}
