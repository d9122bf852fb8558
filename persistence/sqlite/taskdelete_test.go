package sqlite

import (
	"context"
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
		info, err := s.AcquireShard(ctx, shard, "host")
		require.NoError(t, err)
		k := persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: fmt.Sprintf("e%d", shard), RunID: "r"}
		w := &persistence.ExecutionWrite{
			ShardID: shard, RangeID: info.RangeID, Mode: persistence.WriteModeCreate, Key: k, NextDBVersion: 1,
			State: []byte("s"), Lifecycle: persistence.LifecycleRunning,
		}
		for id := int64(1); id <= perShard; id++ {
			w.TimerTasks = append(w.TimerTasks, &persistence.TimerTask{ShardID: shard, TaskID: id, VisibilityTime: at, Execution: k, Payload: []byte("t")})
			w.OutboundTasks = append(w.OutboundTasks, &persistence.OutboundTask{ShardID: shard, TaskID: id, Destination: "d", Execution: k, Payload: []byte("o")})
		}
		results, err := s.WriteBatch(ctx, []*persistence.ExecutionWrite{w})
		require.NoError(t, err)
		require.NoError(t, results[0])
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
	// Every call queued before the connection is free (the leader's own call waits for it), so
	// how they share transactions does not depend on how the goroutines are scheduled after.
	require.Eventually(t, func() bool {
		return s.taskDeletes.Pending(struct{}{}) >= 2*shards-1
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, busy.Rollback())
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	require.Less(t, s.taskDeleteRounds.Load(), int64(shards), "32 calls; deletes that queued together committed together")
	for shard := int32(1); shard <= shards; shard++ {
		timers, err := s.GetTimerTasks(ctx, persistence.GetTimerTasksRequest{ShardID: shard, Before: at.Add(time.Hour), PageSize: 100})
		require.NoError(t, err)
		require.Empty(t, timers)
		outbound, err := s.GetOutboundTasks(ctx, shard, 0, 100)
		require.NoError(t, err)
		require.Empty(t, outbound)
	}
}
