package combine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/common/combine"
)

func TestCombiner(t *testing.T) {
	t.Parallel()

	t.Run("ItemsQueuedDuringAFlushGoInTheNextOneTogether", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		var rounds atomic.Int64
		var mu sync.Mutex
		var flushed []int
		c := combine.New(func(_ context.Context, _ string, items []int) error {
			if rounds.Add(1) == 1 {
				<-release // hold the first flush while the others queue
			}
			mu.Lock()
			flushed = append(flushed, items...)
			mu.Unlock()
			return nil
		})
		var wg sync.WaitGroup
		wg.Go(func() { require.NoError(t, c.Do(context.Background(), "k", 0)) })
		require.Eventually(t, func() bool { return rounds.Load() == 1 }, 5*time.Second, time.Millisecond)
		for i := 1; i <= 20; i++ {
			wg.Go(func() { require.NoError(t, c.Do(context.Background(), "k", i)) })
		}
		require.Eventually(t, func() bool { return c.Pending("k") == 20 }, 5*time.Second, time.Millisecond)
		close(release)
		wg.Wait()
		require.EqualValues(t, 2, rounds.Load())
		require.Len(t, flushed, 21)
		require.Zero(t, c.Pending("k"))
	})

	t.Run("AFailedFlushFailsEveryItemInIt", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		c := combine.New(func(context.Context, int, []string) error { return boom })
		require.ErrorIs(t, c.Do(context.Background(), 1, "a"), boom)
	})

	t.Run("KeysFlushApart", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		byKey := map[string][]int{}
		c := combine.New(func(_ context.Context, key string, items []int) error {
			mu.Lock()
			defer mu.Unlock()
			byKey[key] = append(byKey[key], items...)
			return nil
		})
		var wg sync.WaitGroup
		for i := range 50 {
			key := "even"
			if i%2 == 1 {
				key = "odd"
			}
			wg.Go(func() { require.NoError(t, c.Do(context.Background(), key, i)) })
		}
		wg.Wait()
		require.Len(t, byKey["even"], 25)
		require.Len(t, byKey["odd"], 25)
		for _, i := range byKey["odd"] {
			require.Equal(t, 1, i%2)
		}
	})

	t.Run("ACallerThatGivesUpDoesNotCancelTheFlush", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		flushErr := make(chan error, 1)
		c := combine.New(func(ctx context.Context, _ string, _ []int) error {
			<-release
			flushErr <- ctx.Err()
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Do(ctx, "k", 1) }()
		require.Eventually(t, func() bool { return c.Pending("k") == 0 }, 5*time.Second, time.Millisecond)
		cancel()
		close(release)
		require.NoError(t, <-flushErr, "the flush runs to its end, uncancelled")
		<-done // nil or context.Canceled: both are true
	})
}
