package history

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// A large fleet holds one cache entry per worker for as long as it runs: a field that pushes
// the entry into the allocator's next size class costs every worker 16 bytes more.
func TestCacheEntrySize(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(cacheEntry{}), uintptr(96))
}
