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
// Under steady load nothing notes, and the runtime's own pacing applies. Follow-up looks for a
// few minutes catch what is let go later (see FollowUps). Memory outside the Go heap is given
// back by hooks that run with every release (OnRelease).
package memrelease

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Quiet is how long after the last Note the memory is released.
const Quiet = 10 * time.Second

// What a fleet held is not all garbage at once: the watch ring keeps its last events for a
// minute, caches and maps shrink step by step. For FollowUps × FollowUpEvery after a release,
// what a release would give back (the heap's free pages not yet returned, and the garbage
// made since the last collection; a runtime/metrics read, no collection) is looked at, and
// released again when it exceeds FollowUpMinBytes.
const (
	FollowUps        = 10
	FollowUpEvery    = 30 * time.Second
	FollowUpMinBytes = 4 << 20
)

var (
	quiet         = Quiet // tests shorten them
	followUpEvery = FollowUpEvery
	mu            sync.Mutex
	timer         *time.Timer
	releases      atomic.Int64
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
		release()
		followUp(FollowUps)
	})
}

// hooks are what OnRelease registered, by registration number.
var hooks = struct {
	sync.Mutex
	next int
	fns  map[int]func()
}{fns: map[int]func(){}}

// OnRelease registers fn to run at every release, before the Go runtime returns its free
// pages: a component holding memory outside the Go heap (SQLite's page caches and
// connections, allocated by modernc.org/libc) gives it back there, and whatever Go memory fn
// drops is returned in the same release. fn runs on a goroutine of its own, one release at a
// time; it should bound its own wait. The returned function unregisters it.
func OnRelease(fn func()) (remove func()) {
	hooks.Lock()
	defer hooks.Unlock()
	id := hooks.next
	hooks.next++
	hooks.fns[id] = fn
	return func() {
		hooks.Lock()
		defer hooks.Unlock()
		delete(hooks.fns, id)
	}
}

// ReleaseNow releases at once, hooks included, without waiting for a Note's quiet time.
func ReleaseNow() { release() }

// releasing serializes releases: a follow-up and a Note's release never run hooks at once.
var releasing sync.Mutex

func release() {
	releasing.Lock()
	defer releasing.Unlock()
	hooks.Lock()
	fns := make([]func(), 0, len(hooks.fns))
	for _, fn := range hooks.fns {
		fns = append(fns, fn)
	}
	hooks.Unlock()
	for _, fn := range fns {
		fn()
	}
	debug.FreeOSMemory()
	releases.Add(1)
}

// followUp looks again every FollowUpEvery, n times, unless a new Note took over.
func followUp(n int) {
	if n == 0 {
		return
	}
	time.AfterFunc(followUpEvery, func() {
		mu.Lock()
		noted := timer != nil
		mu.Unlock()
		if noted {
			return // a new burst of notes: its own release and follow-ups come
		}
		if reclaimable() >= FollowUpMinBytes {
			release()
		}
		followUp(n - 1)
	})
}

// reclaimable is what a release would give back now, read without a collection: the heap's
// free pages not yet returned, and the garbage made since the last collection (objects now,
// less what that collection found live). A host the fleet has just left allocates little, so
// its next collection can be minutes away (the runtime forces one every two minutes), and the
// garbage of the fleet's last deletions would stay resident until then, with the heap's
// headroom over it.
func reclaimable() uint64 {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	metrics.Read(samples)
	var v [3]uint64
	for i, s := range samples {
		if s.Value.Kind() != metrics.KindUint64 {
			return 0
		}
		v[i] = s.Value.Uint64()
	}
	free, objects, live := v[0], v[1], v[2]
	if objects > live {
		free += objects - live
	}
	return free
}

// Releases returns how many releases have run in this process.
func Releases() int64 { return releases.Load() }

// ShrinkMapMin is the peak from which ShrinkMap makes a map anew.
const ShrinkMapMin = 1024

// ShrinkMap returns m, or a copy of it sized for what it holds when it has fallen to a
// quarter of its peak (at least minPeak), and whether it made one. Go maps never give back
// their buckets, so a map that once held a fleet keeps that memory until it is made anew (and
// maps.Clone keeps the capacity). peak tracks the largest size seen and restarts at the copy.
func ShrinkMap[K comparable, V any](m map[K]V, peak *int, minPeak int) (map[K]V, bool) {
	*peak = max(*peak, len(m))
	if *peak < minPeak || len(m) > *peak/4 {
		return m, false
	}
	fresh := Resized(m)
	*peak = len(fresh)
	return fresh, true
}

// Resized copies m into a map sized for what it holds.
func Resized[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
