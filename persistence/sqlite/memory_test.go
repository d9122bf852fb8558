package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/common/memrelease"
)

// A memory release (after a large eviction) reaches the store: the idle read connections are
// closed, the write and checkpoint connections shrink their caches, and reads go on, on
// connections the pool opens again. A closed store is no longer called.
func TestReleaseMemory(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, filepath.Join(t.TempDir(), "vigil.db"))

	// Two readers at once leave two idle connections behind.
	c1, err := s.readDB.Conn(ctx)
	require.NoError(t, err)
	c2, err := s.readDB.Conn(ctx)
	require.NoError(t, err)
	require.NoError(t, c1.Close())
	require.NoError(t, c2.Close())
	require.Equal(t, 2, s.readDB.Stats().Idle)

	require.NoError(t, s.ReleaseMemory(ctx), "shrink_memory runs on the write and checkpoint connections")
	require.Zero(t, s.readDB.Stats().Idle, "idle read connections are closed")

	_, err = s.GetShard(ctx, 1) // not found, but read on a fresh connection
	require.Error(t, err)
	require.Equal(t, 1, s.readDB.Stats().Idle, "the pool keeps the reopened connection")

	before := s.memoryReleases.Load()
	memrelease.ReleaseNow()
	require.Equal(t, before+1, s.memoryReleases.Load(), "memrelease's release runs the store's")
	require.Zero(t, s.readDB.Stats().Idle)

	require.NoError(t, s.Close())
	memrelease.ReleaseNow()
	require.Equal(t, before+1, s.memoryReleases.Load(), "a closed store is not released again")
}
