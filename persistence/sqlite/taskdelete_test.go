package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/persistence"
)

// TestTaskDeletesShareTransactions: the task queues of many shards delete executed tasks at
// the same time; their deletes share transactions instead of taking one fsync each, and every
// one of them is done.
func TestTaskDeletesShareTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTestStore(t, filepath.Join(t.TempDir(), "vigil.db"))
	defer s.Close()

	const shards, perShard = 16, 5
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for shard := int32(1); shard <= shards; shard++ {
		writeTaskRows(t, s, shard, perShard, at)
	}

	// Hold the write connection, as a long group commit would, while every queue calls in.
	busy, err := s.writeDB.BeginTx(ctx, nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 2*shards)
	for shard := int32(1); shard <= shards; shard++ {
		var keys []persistence.TimerTaskKey
		var ids []int64
		for id := int64(1); id <= perShard; id++ {
			keys = append(keys, persistence.TimerTaskKey{VisibilityTime: at, TaskID: id})
			ids = append(ids, id)
		}
		wg.Go(func() { errs <- s.CompleteTimerTasks(ctx, shard, keys) })
		wg.Go(func() { errs <- s.CompleteOutboundTasks(ctx, shard, ids) })
	}
	// Every call queued before the connection is free. A flusher may have taken the first of
	// them after its linger and waits for the connection too; the others wait for its next
	// round.
	require.Eventually(t, func() bool {
		calls, _, _ := s.taskDeletes.counts()
		return calls == 2*shards
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, busy.Rollback())
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	_, _, rounds := s.taskDeletes.counts()
	require.Less(t, rounds, shards, "32 calls; deletes that queued together committed together")
	for shard := int32(1); shard <= shards; shard++ {
		timers, err := s.GetTimerTasks(ctx, persistence.GetTimerTasksRequest{ShardID: shard, Before: at.Add(time.Hour), PageSize: 100})
		require.NoError(t, err)
		require.Empty(t, timers)
		outbound, err := s.GetOutboundTasks(ctx, shard, 0, 100)
		require.NoError(t, err)
		require.Empty(t, outbound)
	}
}

// writeTaskRows creates an execution in shard with n timer and n outbound tasks (IDs 1..n).
func writeTaskRows(t *testing.T, s *Store, shard int32, n int64, at time.Time) {
	t.Helper()
	ctx := context.Background()
	info, err := s.AcquireShard(ctx, shard, "host")
	require.NoError(t, err)
	k := persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: fmt.Sprintf("e%d", shard), RunID: "r"}
	w := &persistence.ExecutionWrite{
		ShardID: shard, RangeID: info.RangeID, Mode: persistence.WriteModeCreate, Key: k, NextDBVersion: 1,
		State: []byte("s"), Lifecycle: persistence.LifecycleRunning,
	}
	for id := int64(1); id <= n; id++ {
		w.TimerTasks = append(w.TimerTasks, &persistence.TimerTask{ShardID: shard, TaskID: id, VisibilityTime: at, Execution: k, Payload: []byte("t")})
		w.OutboundTasks = append(w.OutboundTasks, &persistence.OutboundTask{ShardID: shard, TaskID: id, Destination: "d", Execution: k, Payload: []byte("o")})
	}
	results, err := s.WriteBatch(ctx, []*persistence.ExecutionWrite{w})
	require.NoError(t, err)
	require.NoError(t, results[0])
}

// TestTaskDeletesRideInWriteBatches: a delete of executed tasks waits for the next group
// commit and commits in its transaction, with no transaction of its own. One that fails there
// is undone alone: the batch's own write commits, and the delete goes in a later batch.
func TestTaskDeletesRideInWriteBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTestStore(t, filepath.Join(t.TempDir(), "vigil.db"))
	defer s.Close()
	// Only a WriteBatch may carry the deletes in this test.
	s.taskDeletes.linger = time.Hour

	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	writeTaskRows(t, s, 1, 3, at)
	writeTaskRows(t, s, 2, 3, at)

	completed := make(chan error, 1)
	go func() { completed <- s.CompleteOutboundTasks(ctx, 1, []int64{1, 2, 3}) }()
	// A delete that fails the first time it runs, inside a batch.
	failures := 1
	failing := make(chan error, 1)
	go func() {
		failing <- s.taskDeletes.do(ctx, 1, func(ctx context.Context, tx *sql.Tx) error {
			if failures > 0 {
				failures--
				// Half done, then failing: the savepoint must undo the half.
				if _, err := tx.ExecContext(ctx, `DELETE FROM timer_tasks WHERE shard_id = 2`); err != nil {
					return err
				}
				return errors.New("disk hiccup")
			}
			_, err := tx.ExecContext(ctx, `DELETE FROM outbound_tasks WHERE shard_id = 2 AND task_id = 1`)
			return err
		})
	}()
	require.Eventually(t, func() bool {
		_, pending, _ := s.taskDeletes.counts()
		return pending == 2
	}, 10*time.Second, time.Millisecond)

	// The next batch carries both: the first commits, the failing one is undone and given back.
	writeTaskRows(t, s, 3, 1, at)
	require.NoError(t, <-completed)
	outbound, err := s.GetOutboundTasks(ctx, 1, 0, 100)
	require.NoError(t, err)
	require.Empty(t, outbound, "deleted by the batch that carried them")
	timers, err := s.GetTimerTasks(ctx, persistence.GetTimerTasksRequest{ShardID: 2, Before: at.Add(time.Hour), PageSize: 100})
	require.NoError(t, err)
	require.Len(t, timers, 3, "the failed delete's half was rolled back")
	_, pending, rounds := s.taskDeletes.counts()
	require.Equal(t, 1, pending, "the failed delete waits for another transaction")
	require.Zero(t, rounds, "no transaction of deletes alone")
	outbound, err = s.GetOutboundTasks(ctx, 3, 0, 100)
	require.NoError(t, err)
	require.Len(t, outbound, 1, "the batch's own write committed")

	// The batch after carries it again, and now it succeeds.
	writeTaskRows(t, s, 4, 1, at)
	require.NoError(t, <-failing)
	outbound, err = s.GetOutboundTasks(ctx, 2, 0, 100)
	require.NoError(t, err)
	require.Len(t, outbound, 2)
	_, _, rounds = s.taskDeletes.counts()
	require.Zero(t, rounds)
}

// TestTaskDeletesPerBatchAreCapped: a batch carries the oldest deletes up to
// taskDeletesPerBatch rows (at least one call's, however large), in order.
func TestTaskDeletesPerBatchAreCapped(t *testing.T) {
	t.Parallel()
	q := &taskDeletes{}
	for _, rows := range []int{200, 100, 50, 512} {
		q.pending = append(q.pending, &taskDelete{rows: rows})
	}
	rowsOf := func(ds []*taskDelete) []int {
		var out []int
		for _, d := range ds {
			out = append(out, d.rows)
		}
		return out
	}
	require.Equal(t, []int{200}, rowsOf(q.take()), "200 + 100 would pass the cap")
	require.Equal(t, []int{100, 50}, rowsOf(q.take()))
	require.Equal(t, []int{512}, rowsOf(q.take()), "one call's delete goes whole")
	require.Empty(t, q.take())
}
