package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
	"github.com/vigilhq/vigil/persistence/persistencetest"
)

// testDSNDefault is the local test database: trust auth on 127.0.0.1, user postgres.
const testDSNDefault = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	testDSNOnce sync.Once
	testDSN     string
	testDSNErr  error
)

// requireTestDSN returns a DSN that connects, or skips the test (fails it when CI is set: CI
// has PostgreSQL, and a skip there would hide the backend's tests).
func requireTestDSN(t testing.TB) string {
	t.Helper()
	testDSNOnce.Do(func() {
		candidates := []string{os.Getenv("VIGIL_POSTGRES_DSN")}
		if candidates[0] == "" {
			// Local installs differ in their superuser's name.
			candidates = []string{testDSNDefault, withUser(testDSNDefault, "root")}
		}
		for _, dsn := range candidates {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			conn, err := pgx.Connect(ctx, dsn)
			if err == nil {
				err = conn.Ping(ctx)
				_ = conn.Close(ctx)
			}
			cancel()
			if err == nil {
				testDSN, testDSNErr = dsn, nil
				return
			}
			testDSNErr = fmt.Errorf("%s: %w", redact(dsn), err)
		}
	})
	if testDSNErr != nil {
		msg := fmt.Sprintf("PostgreSQL unreachable (%v); start it or set VIGIL_POSTGRES_DSN", testDSNErr)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return testDSN
}

func withUser(dsn, user string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.User = url.User(user)
	return u.String()
}

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return u.Redacted()
}

// newTestSchema creates an empty schema that is dropped when the test ends, so tests run in
// parallel and repeatedly against one database.
func newTestSchema(t testing.TB) (dsn, schema string) {
	t.Helper()
	dsn = requireTestDSN(t)
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	schema = "vigil_test_" + hex.EncodeToString(suffix[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return dsn, schema
}

func openTestStore(t testing.TB, dsn, schema string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{DSN: dsn, Schema: schema, MaxConns: 4}, zaptest.NewLogger(t))
	require.NoError(t, err)
	return s
}

func TestStoreContract(t *testing.T) {
	persistencetest.RunStoreSuite(t, func(t *testing.T) persistence.Store {
		dsn, schema := newTestSchema(t)
		return openTestStore(t, dsn, schema)
	})
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("MigrationsAreIdempotentAcrossReopen", func(t *testing.T) {
		t.Parallel()
		dsn, schema := newTestSchema(t)
		for range 3 {
			s := openTestStore(t, dsn, schema)
			var versions, latest int
			require.NoError(t, s.pool.QueryRow(ctx, `SELECT COUNT(*), MAX(version) FROM schema_version`).Scan(&versions, &latest))
			require.Equal(t, LatestSchemaVersion(), latest)
			require.Equal(t, LatestSchemaVersion(), versions, "each migration recorded once")
			require.NoError(t, s.Close())
		}
	})

	t.Run("ConcurrentOpensMigrateOnce", func(t *testing.T) {
		t.Parallel()
		dsn, schema := newTestSchema(t)
		const hosts = 4
		var wg sync.WaitGroup
		errs := make(chan error, hosts)
		for range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := Open(ctx, Config{DSN: dsn, Schema: schema, MaxConns: 2}, zaptest.NewLogger(t))
				if err == nil {
					err = s.Close()
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		s := openTestStore(t, dsn, schema)
		defer s.Close()
		var versions int
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM schema_version`).Scan(&versions))
		require.Equal(t, LatestSchemaVersion(), versions)
	})

	t.Run("CreatesMissingSchema", func(t *testing.T) {
		t.Parallel()
		dsn, schema := newTestSchema(t)
		// A schema inside the test's own, dropped with it by the cleanup's CASCADE would not
		// work (schemas do not nest), so create a sibling and drop it here.
		missing := schema + "_new"
		s, err := Open(ctx, Config{DSN: dsn, Schema: missing}, zaptest.NewLogger(t))
		require.NoError(t, err)
		_, err = s.pool.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{missing}.Sanitize()+` CASCADE`)
		require.NoError(t, err)
		require.NoError(t, s.Close())
	})

	t.Run("DataSurvivesCloseAndReopen", func(t *testing.T) {
		t.Parallel()
		dsn, schema := newTestSchema(t)
		s := openTestStore(t, dsn, schema)
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
		require.NoError(t, s.Close())

		s = openTestStore(t, dsn, schema)
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
	})

	t.Run("NewerSchemaIsRefused", func(t *testing.T) {
		t.Parallel()
		dsn, schema := newTestSchema(t)
		s := openTestStore(t, dsn, schema)
		_, err := s.pool.Exec(ctx, `INSERT INTO schema_version (version, name) VALUES ($1, 'from_the_future.sql')`,
			LatestSchemaVersion()+1)
		require.NoError(t, err)
		require.NoError(t, s.Close())

		_, err = Open(ctx, Config{DSN: dsn, Schema: schema}, zaptest.NewLogger(t))
		require.ErrorContains(t, err, fmt.Sprintf("schema version %d is newer than this binary supports (%d)",
			LatestSchemaVersion()+1, LatestSchemaVersion()))
	})

	t.Run("EmptyDSNIsRefused", func(t *testing.T) {
		t.Parallel()
		_, err := Open(ctx, Config{}, nil)
		require.ErrorContains(t, err, "DSN is empty")
	})

	t.Run("BadDSNDoesNotLeakPassword", func(t *testing.T) {
		t.Parallel()
		_, err := Open(ctx, Config{DSN: "postgres://u:hunter2@host:notaport/db"}, nil)
		require.Error(t, err)
		require.NotContains(t, err.Error(), "hunter2")
	})
}

// twoHosts is two stores on one schema, standing for two history hosts sharing a database.
type twoHosts struct {
	a, b *Store
}

func newTwoHosts(t *testing.T) *twoHosts {
	t.Helper()
	dsn, schema := newTestSchema(t)
	h := &twoHosts{a: openTestStore(t, dsn, schema), b: openTestStore(t, dsn, schema)}
	t.Cleanup(func() {
		require.NoError(t, h.a.Close())
		require.NoError(t, h.b.Close())
	})
	return h
}

func createWrite(shard persistence.ShardInfo, businessID string) *persistence.ExecutionWrite {
	return &persistence.ExecutionWrite{
		ShardID: shard.ShardID, RangeID: shard.RangeID, Mode: persistence.WriteModeCreate,
		Key:           persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: businessID, RunID: "run-1"},
		NextDBVersion: 1, State: []byte("s"), Lifecycle: persistence.LifecycleRunning,
	}
}

func TestFencingAcrossHosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const shardID = int32(5)

	t.Run("WriteOfHostWhoseShardWasTakenIsFenced", func(t *testing.T) {
		t.Parallel()
		h := newTwoHosts(t)
		ownedByA, err := h.a.AcquireShard(ctx, shardID, "host-a")
		require.NoError(t, err)
		w := createWrite(ownedByA, "worker-1")
		results, err := h.a.WriteBatch(ctx, []*persistence.ExecutionWrite{w})
		require.NoError(t, err)
		require.NoError(t, results[0])

		ownedByB, err := h.b.AcquireShard(ctx, shardID, "host-b")
		require.NoError(t, err)

		update := createWrite(ownedByA, "worker-1")
		update.Mode, update.PrevDBVersion, update.NextDBVersion = persistence.WriteModeUpdate, 1, 2
		results, err = h.a.WriteBatch(ctx, []*persistence.ExecutionWrite{update, createWrite(ownedByA, "worker-2")})
		require.NoError(t, err)
		for i, res := range results {
			var lost *persistence.ShardOwnershipLostError
			require.ErrorAs(t, res, &lost, "write %d", i)
			require.Equal(t, persistence.ShardOwnershipLostError{ShardID: shardID, RangeID: ownedByA.RangeID, StoredRangeID: ownedByB.RangeID}, *lost)
		}
		rec, err := h.b.GetExecution(ctx, shardID, update.Key)
		require.NoError(t, err)
		require.Equal(t, int64(1), rec.DBVersion)

		update.RangeID = ownedByB.RangeID
		results, err = h.b.WriteBatch(ctx, []*persistence.ExecutionWrite{update})
		require.NoError(t, err)
		require.NoError(t, results[0])
	})

	// An acquisition that arrives while a batch of the old owner is in flight waits for it:
	// the batch's writes land under the old range_id, and none of the old owner's later
	// writes do. Both write paths hold the fence: the pipelined one (every check passes) and
	// the write-by-write one (a write in the batch fails its check).
	for _, tc := range []struct {
		name         string
		failingWrite bool
	}{
		{"AcquireWaitsForInFlightBatch", false},
		{"AcquireWaitsForInFlightBatchWriteByWrite", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn, schema := newTestSchema(t)
			a := openTestStore(t, dsn, schema)
			defer a.Close()
			appName := "vigil-test-host-b-" + schema
			b, err := Open(ctx, Config{DSN: withParam(dsn, "application_name", appName), Schema: schema, MaxConns: 2}, zaptest.NewLogger(t))
			require.NoError(t, err)
			defer b.Close()

			ownedByA, err := a.AcquireShard(ctx, shardID, "host-a")
			require.NoError(t, err)

			acquired := make(chan persistence.ShardInfo, 1)
			acquireErr := make(chan error, 1)
			hookRuns, fallBacks := 0, 0
			a.testHooks.afterFence = func(int32) {
				hookRuns++
				// host-a's batch holds the shard row; host-b tries to take the shard now.
				go func() {
					info, err := b.AcquireShard(ctx, shardID, "host-b")
					acquireErr <- err
					acquired <- info
				}()
				waitForLockWait(t, a, appName)
				select {
				case <-acquired:
					t.Error("AcquireShard completed while a write under the old range_id was in flight")
				default:
				}
			}
			a.testHooks.fellBack = func() { fallBacks++ }
			writes := []*persistence.ExecutionWrite{createWrite(ownedByA, "worker-1")}
			if tc.failingWrite {
				ghost := createWrite(ownedByA, "ghost")
				ghost.Mode, ghost.PrevDBVersion, ghost.NextDBVersion = persistence.WriteModeUpdate, 1, 2
				writes = append(writes, ghost)
			}
			results, err := a.WriteBatch(ctx, writes)
			require.NoError(t, err)
			a.testHooks.afterFence, a.testHooks.fellBack = nil, nil
			require.NoError(t, results[0], "the in-flight write kept its fence")
			require.Equal(t, 1, hookRuns, "the shard was locked once, by the attempt that committed")
			if tc.failingWrite {
				var nf *persistence.NotFoundError
				require.ErrorAs(t, results[1], &nf)
				require.Equal(t, 1, fallBacks)
			} else {
				require.Zero(t, fallBacks, "a batch whose checks pass commits pipelined")
			}

			require.NoError(t, <-acquireErr)
			ownedByB := <-acquired
			require.Greater(t, ownedByB.RangeID, ownedByA.RangeID)

			results, err = a.WriteBatch(ctx, []*persistence.ExecutionWrite{createWrite(ownedByA, "worker-2")})
			require.NoError(t, err)
			var lost *persistence.ShardOwnershipLostError
			require.ErrorAs(t, results[0], &lost)
			_, err = b.GetExecution(ctx, shardID, createWrite(ownedByA, "worker-1").Key)
			require.NoError(t, err)
		})
	}

	t.Run("ConcurrentAcquiresGetDistinctRangeIDs", func(t *testing.T) {
		t.Parallel()
		h := newTwoHosts(t)
		const perHost = 20
		var mu sync.Mutex
		seen := map[int64]string{}
		var wg sync.WaitGroup
		for name, s := range map[string]*Store{"host-a": h.a, "host-b": h.b} {
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range perHost / 2 {
						info, err := s.AcquireShard(ctx, shardID, name)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if other, dup := seen[info.RangeID]; dup {
							t.Errorf("range_id %d handed to %s and %s", info.RangeID, other, name)
						}
						seen[info.RangeID] = name
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		require.Len(t, seen, 2*perHost)
		info, err := h.a.GetShard(ctx, shardID)
		require.NoError(t, err)
		require.Equal(t, int64(2*perHost), info.RangeID, "every acquisition incremented once")
	})

	// Two hosts creating the same business ID at once: exactly one wins the business ID, the
	// other gets the contract's conflict error, not a database error.
	t.Run("ConcurrentCreatesOfOneBusinessID", func(t *testing.T) {
		t.Parallel()
		h := newTwoHosts(t)
		shard, err := h.a.AcquireShard(ctx, shardID, "host-a")
		require.NoError(t, err)
		for round := range 10 {
			bid := fmt.Sprintf("worker-%d", round)
			results := make([]error, 2)
			var wg sync.WaitGroup
			for i, s := range []*Store{h.a, h.b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w := createWrite(shard, bid)
					w.Key.RunID = fmt.Sprintf("run-%d", i)
					res, err := s.WriteBatch(ctx, []*persistence.ExecutionWrite{w})
					if err != nil {
						results[i] = err
						return
					}
					results[i] = res[0]
				}()
			}
			wg.Wait()
			var conflict *persistence.CurrentExecutionConflictError
			switch {
			case results[0] == nil:
				require.ErrorAs(t, results[1], &conflict, "round %d", round)
				require.Equal(t, "run-0", conflict.CurrentRunID)
			case results[1] == nil:
				require.ErrorAs(t, results[0], &conflict, "round %d", round)
				require.Equal(t, "run-1", conflict.CurrentRunID)
			default:
				t.Fatalf("round %d: neither create won: %v, %v", round, results[0], results[1])
			}
		}
	})
}

func withParam(dsn, key, value string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// waitForLockWait waits until a backend with the given application_name is blocked on a lock.
func waitForLockWait(t *testing.T, s *Store, appName string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var waiting bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock')`, appName).Scan(&waiting)
		if err != nil {
			t.Errorf("waiting for AcquireShard to block: %v", err)
			return
		}
		if waiting {
			return
		}
		select {
		case <-ctx.Done():
			t.Error("AcquireShard never waited for the in-flight batch")
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestWriteRefusesTextPostgresCannotStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := newTestSchema(t)
	s := openTestStore(t, dsn, schema)
	defer s.Close()
	shard, err := s.AcquireShard(ctx, 1, "host-a")
	require.NoError(t, err)
	nul := createWrite(shard, "worker\x00")
	badUTF8 := createWrite(shard, "worker-2")
	badUTF8.CollectionPuts = []persistence.CollectionEntry{{Collection: "c", Key: "\xff", Value: []byte("v")}}
	good := createWrite(shard, "worker-3")
	results, err := s.WriteBatch(ctx, []*persistence.ExecutionWrite{nul, badUTF8, good})
	require.NoError(t, err)
	require.ErrorContains(t, results[0], "valid UTF-8 without NUL")
	require.ErrorContains(t, results[1], "valid UTF-8 without NUL")
	require.NoError(t, results[2])

	_, err = s.GetExecution(ctx, 1, nul.Key)
	var nf *persistence.NotFoundError
	require.ErrorAs(t, err, &nf)
}

// A shard taken by another host costs the old owner's batch no write-by-write run: its writes
// are refused, and the batch's other writes commit pipelined.
func TestFencedWritesLeaveTheRestPipelined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newTwoHosts(t)
	kept, err := h.a.AcquireShard(ctx, 1, "host-a")
	require.NoError(t, err)
	lostShard, err := h.a.AcquireShard(ctx, 2, "host-a")
	require.NoError(t, err)
	results, err := h.a.WriteBatch(ctx, []*persistence.ExecutionWrite{createWrite(kept, "worker-1"), createWrite(lostShard, "worker-2")})
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, results)
	taken, err := h.b.AcquireShard(ctx, 2, "host-b")
	require.NoError(t, err)

	fallBacks := 0
	h.a.testHooks.fellBack = func() { fallBacks++ }
	update := func(shard persistence.ShardInfo, businessID string) *persistence.ExecutionWrite {
		w := createWrite(shard, businessID)
		w.Mode, w.PrevDBVersion, w.NextDBVersion = persistence.WriteModeUpdate, 1, 2
		return w
	}
	results, err = h.a.WriteBatch(ctx, []*persistence.ExecutionWrite{
		update(lostShard, "worker-2"), update(kept, "worker-1"), createWrite(lostShard, "worker-3"), createWrite(kept, "worker-4"),
	})
	require.NoError(t, err)
	require.Zero(t, fallBacks)
	var lost *persistence.ShardOwnershipLostError
	for _, i := range []int{0, 2} {
		require.ErrorAs(t, results[i], &lost, "write %d", i)
		require.Equal(t, persistence.ShardOwnershipLostError{ShardID: 2, RangeID: lostShard.RangeID, StoredRangeID: taken.RangeID}, *lost)
	}
	require.NoError(t, results[1])
	require.NoError(t, results[3])

	rec, err := h.b.GetExecution(ctx, 2, update(lostShard, "worker-2").Key)
	require.NoError(t, err)
	require.Equal(t, int64(1), rec.DBVersion)
	_, err = h.b.GetExecution(ctx, 2, createWrite(lostShard, "worker-3").Key)
	var nf *persistence.NotFoundError
	require.ErrorAs(t, err, &nf)
	rec, err = h.b.GetExecution(ctx, 1, update(kept, "worker-1").Key)
	require.NoError(t, err)
	require.Equal(t, int64(2), rec.DBVersion)
	_, err = h.b.GetExecution(ctx, 1, createWrite(kept, "worker-4").Key)
	require.NoError(t, err)
}

// Reads that hold every connection of the pool do not hold up writes: group commit has
// connections of its own, so heartbeats still commit during a burst of reads.
func TestWritesAreNotQueuedBehindReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := newTestSchema(t)
	s := openTestStore(t, dsn, schema)
	defer s.Close()
	shard, err := s.AcquireShard(ctx, 1, "host-a")
	require.NoError(t, err)

	var held []*pgxpool.Conn
	for range s.pool.Config().MaxConns {
		conn, err := s.pool.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, conn)
	}
	defer func() {
		for _, conn := range held {
			conn.Release()
		}
	}()
	results, err := s.WriteBatch(ctx, []*persistence.ExecutionWrite{createWrite(shard, "worker-1")})
	require.NoError(t, err)
	require.NoError(t, results[0])
}

// TestMigrationBackfillsVisibility: executions written by a binary that knew schema 5 get
// visibility records after the migration to 6 and the backfill.
func TestMigrationBackfillsVisibility(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := newTestSchema(t)
	ms, err := sqlcommon.ReadMigrations(schemaFS)
	require.NoError(t, err)
	require.Equal(t, 6, ms[5].Version)

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	stmts := []string{`SET search_path TO ` + pgx.Identifier{schema}.Sanitize(),
		`CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL)`}
	for _, m := range ms[:5] {
		stmts = append(stmts, m.SQL, fmt.Sprintf(`INSERT INTO schema_version (version, name) VALUES (%d, '%s')`, m.Version, m.Name))
	}
	for _, stmt := range append(stmts, persistencetest.PreVisibilityExecutions) {
		_, err := conn.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, conn.Close(ctx))

	s := openTestStore(t, dsn, schema)
	defer s.Close()
	persistencetest.RequireBackfilledAfterMigration(t, s)
}
