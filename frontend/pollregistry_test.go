package frontend

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/common/clock"
)

// answered reports whether a poll the worker opens now is answered at once (its worker just
// shut down).
func answered(r *pollRegistry, workerInstanceKey string) bool {
	done, cancel := r.register(workerInstanceKey)
	defer cancel()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func TestPollRegistryTombstones(t *testing.T) {
	ts := clock.NewFakeTimeSource()
	r := newPollRegistry(ts)

	// A deploy: thousands of workers shut down within one TTL. Each one's polls are answered
	// at once for the TTL after its own shutdown, and not after it, however the sweeps fall.
	keys := make([]string, 3000)
	for i := range keys {
		keys[i] = fmt.Sprintf("w-%04d", i)
		r.complete(keys[i])
		if i%1000 == 999 {
			ts.Advance(3 * time.Second)
		}
	}
	// Shut down at 0s, 3s and 6s; now 9s.
	require.True(t, answered(r, keys[0]), "within its TTL")
	require.False(t, answered(r, "w-never"), "never shut down")
	ts.Advance(2 * time.Second) // 11s
	require.False(t, answered(r, keys[0]), "its TTL (10s) has passed, though no sweep has dropped it")
	require.True(t, answered(r, keys[1000]))
	require.True(t, answered(r, keys[2999]))

	// A later shutdown sweeps: only the expired tombstones go.
	ts.Advance(4 * time.Second) // 15s: the first two thousand have expired
	r.complete("w-late")
	r.mu.Lock()
	require.Len(t, r.tombstones, 1001)
	r.mu.Unlock()
	require.True(t, answered(r, keys[2999]))
	require.True(t, answered(r, "w-late"))
}

// BenchmarkPollRegistryDeploy is one shutdown of a deploy that stops the fleet within a
// second: every shutdown of the last TTL holds a tombstone. A sweep on every shutdown made
// each one walk them all (quadratic in the deploy).
func BenchmarkPollRegistryDeploy(b *testing.B) {
	ts := clock.NewFakeTimeSource()
	r := newPollRegistry(ts)
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("w-%08d", i)
	}
	b.ResetTimer()
	for i, k := range keys {
		r.complete(k)
		if i%1000 == 999 {
			ts.Advance(10 * time.Millisecond)
		}
	}
}
