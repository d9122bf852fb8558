package memrelease

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Notes in a burst release once, after the burst; the memory freed by then goes back to the
// operating system at once rather than when the runtime gets to it.
func TestNotesReleaseOnceAfterTheBurst(t *testing.T) {
	quiet = 2 * time.Second
	t.Cleanup(func() { quiet = Quiet })

	big := make([][]byte, 64)
	for i := range big {
		big[i] = make([]byte, 1<<20)
	}
	runtime.KeepAlive(big)
	big = nil

	before := Releases()
	for range 5 {
		Note()
		time.Sleep(20 * time.Millisecond) // a burst of notes, each well within quiet of the last
	}
	require.Eventually(t, func() bool { return Releases() == before+1 }, 30*time.Second, 10*time.Millisecond)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	require.GreaterOrEqual(t, ms.HeapReleased, uint64(64<<20), "the 64 MiB freed went back to the OS")
	time.Sleep(quiet)
	require.Equal(t, before+1, Releases(), "one release for the burst")
}

// A release runs every registered hook, before the runtime returns its memory; a removed hook
// no longer runs.
func TestReleaseRunsHooks(t *testing.T) {
	var first, second int
	removeFirst := OnRelease(func() { first++ })
	removeSecond := OnRelease(func() { second++ })
	t.Cleanup(removeSecond)

	ReleaseNow()
	require.Equal(t, 1, first)
	require.Equal(t, 1, second)

	removeFirst()
	ReleaseNow()
	require.Equal(t, 1, first, "a removed hook does not run")
	require.Equal(t, 2, second)
}

// A follow-up releases the garbage a quiet host has not collected yet, not only the free pages
// it has: with little allocation after a fleet has gone, the next collection can be minutes
// away, and the fleet's last garbage would stay resident until then.
func TestFollowUpCountsUncollectedGarbage(t *testing.T) {
	// No release (another test's follow-ups) and no collection of the test's own while it
	// runs: the garbage stays uncollected until it is looked at.
	releasing.Lock()
	defer releasing.Unlock()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))

	debug.FreeOSMemory()
	require.Less(t, reclaimable(), uint64(FollowUpMinBytes), "just released: nothing for a follow-up")

	garbage := make([][]byte, 32)
	for i := range garbage {
		garbage[i] = make([]byte, 1<<20)
	}
	runtime.KeepAlive(garbage)
	garbage = nil

	require.GreaterOrEqual(t, reclaimable(), uint64(FollowUpMinBytes), "32 MiB of uncollected garbage is worth a release")
}
