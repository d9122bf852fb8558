package overload

import (
	"math"
	"time"
)

// adaptiveLimit is the in-flight limit per shard, adjusted by additive increase and
// multiplicative decrease (AIMD) on the time admitted writes hold their slot.
//
// A write holds its slot mostly while it waits for its group commit, so that time is the
// store's latency as this host loads it. While it stays under the target and the limit was
// reached (calls had to wait for a slot), the limit grows by one per window: more calls at
// once make larger group commits, which is how the store's throughput grows. Once it passes
// the target, the limit shrinks by a quarter per window: calls already admitted are served
// sooner, and the rest wait in the queue, where their wait can be estimated, ordered and
// refused at once when it would not fit, instead of in the committer, where a call whose
// caller gave up still costs a write.
//
// The limit converges near throughput × target (Little's law): enough calls in flight to keep
// the writer busy with full batches, no more. It is not safe for concurrent use; the
// Controller calls it under its lock.
type adaptiveLimit struct {
	limit float64
	// windowStart opens the current window; sum, n and saturated summarize it.
	windowStart time.Time
	sum         time.Duration
	n           int
	saturated   bool
}

// Windows are at least adaptiveWindow long and hold at least adaptiveMinSamples samples, so
// that a decision rests on more than one batch.
const (
	adaptiveWindow     = 250 * time.Millisecond
	adaptiveMinSamples = 8
	adaptiveDecrease   = 0.75
)

// current returns the limit within [lo, hi]. target <= 0 disables adaptation: the limit is hi.
func (l *adaptiveLimit) current(lo, hi int, target time.Duration) int {
	hi = max(1, hi)
	lo = min(max(1, lo), hi)
	if target <= 0 {
		return hi
	}
	if l.limit == 0 {
		l.limit = float64(hi) // start open; the first slow window closes it quickly
	}
	l.limit = math.Min(math.Max(l.limit, float64(lo)), float64(hi))
	return int(l.limit)
}

// markSaturated records that a call found the limit reached and had to wait.
func (l *adaptiveLimit) markSaturated() { l.saturated = true }

// observe adds the slot time of one admitted write, and at the end of a window moves the limit.
func (l *adaptiveLimit) observe(now time.Time, took time.Duration, lo, hi int, target time.Duration) {
	if target <= 0 {
		return
	}
	if l.windowStart.IsZero() {
		l.windowStart = now
	}
	l.sum += took
	l.n++
	if now.Sub(l.windowStart) < adaptiveWindow || l.n < adaptiveMinSamples {
		return
	}
	cur := float64(l.current(lo, hi, target))
	mean := l.sum / time.Duration(l.n)
	switch {
	case mean > target:
		l.limit = cur * adaptiveDecrease
	case l.saturated:
		l.limit = cur + 1
	}
	l.current(lo, hi, target) // clamp
	l.windowStart, l.sum, l.n, l.saturated = now, 0, 0, false
}
