// Package memrelease gives the memory of a fleet that has gone back to the operating system
// soon after it went, instead of minutes later.
//
// The Go runtime returns freed memory by itself, but late on a quiet server: with nothing
// allocating, garbage is collected only by the forced collection every two minutes, and the
// background scavenger then hands free pages back gradually. A host that has just dropped
// 100,000 workers would keep hundreds of megabytes resident for minutes, which is exactly when
// an operator looks at it. So the components that let go of a large amount at once (an
// execution cache shrinking to a quarter of a large peak, the watch ring emptying after a
// burst) call Note, and once such notes have been quiet for Quiet, debug.FreeOSMemory runs:
// one collection and a full scavenge. That costs a few milliseconds at the heap sizes left
// after a fleet has gone, and happens at most once per Quiet however many notes come in.
// Under steady load nothing notes, and the runtime's own pacing applies.
package memrelease

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Quiet is how long after the last Note the memory is released.
const Quiet = 10 * time.Second

var (
	quiet    = Quiet // tests shorten it
	mu       sync.Mutex
	timer    *time.Timer
	releases atomic.Int64
)

// Note records that a large amount of memory was just let go. The release follows once no
// other Note came for Quiet.
func Note() {
	mu.Lock()
	defer mu.Unlock()
	if timer != nil {
		timer.Reset(quiet)
		return
	}
	timer = time.AfterFunc(quiet, func() {
		mu.Lock()
		timer = nil
		mu.Unlock()
		debug.FreeOSMemory()
		releases.Add(1)
	})
}

// Releases returns how many releases have run in this process.
func Releases() int64 { return releases.Load() }
