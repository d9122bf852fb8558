// Package clock provides the time source that all server code reads time from.
//
// Component code never calls time.Now: it receives a TimeSource, so that tests can move a fake
// clock instead of sleeping and so that every decision in one transaction sees the same instant.
package clock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// TimeSource is the only way vigil code learns what time it is.
type TimeSource interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed and returns a Timer that can
	// cancel the call.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer returns a Timer whose channel receives the time once d has elapsed.
	NewTimer(d time.Duration) (<-chan time.Time, Timer)
	// NewTimerAt returns a Timer whose channel receives the time once deadline has passed.
	// Prefer it to NewTimer(deadline.Sub(Now())) when the deadline is absolute: with a fake
	// clock, time can move between the two calls and push the timer past its deadline.
	NewTimerAt(deadline time.Time) (<-chan time.Time, Timer)
}

// Timer is a cancellable pending event of a TimeSource.
type Timer interface {
	// Stop prevents the timer from firing. It returns false if the timer already fired or was
	// stopped.
	Stop() bool
}

// RealTimeSource reads the system clock.
type RealTimeSource struct{}

// NewRealTimeSource returns a TimeSource backed by the system clock.
func NewRealTimeSource() RealTimeSource { return RealTimeSource{} }

// Now implements TimeSource.
func (RealTimeSource) Now() time.Time { return time.Now() }

// AfterFunc implements TimeSource.
func (RealTimeSource) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// NewTimer implements TimeSource.
func (RealTimeSource) NewTimer(d time.Duration) (<-chan time.Time, Timer) {
	t := time.NewTimer(d)
	return t.C, t
}

// NewTimerAt implements TimeSource.
func (RealTimeSource) NewTimerAt(deadline time.Time) (<-chan time.Time, Timer) {
	t := time.NewTimer(time.Until(deadline))
	return t.C, t
}

// FakeTimeSource is a TimeSource for tests: time stands still until the test moves it.
// Timers fire synchronously inside Advance/Update, in deadline order.
type FakeTimeSource struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// NewFakeTimeSource returns a fake clock that starts at a fixed, arbitrary instant, so test
// output does not depend on when the test ran.
func NewFakeTimeSource() *FakeTimeSource {
	return &FakeTimeSource{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// Now implements TimeSource.
func (f *FakeTimeSource) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d and fires every timer that came due.
func (f *FakeTimeSource) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: FakeTimeSource cannot move backwards")
	}
	f.move(func(now time.Time) time.Time { return now.Add(d) })
}

// Update sets the clock to t (which must not be earlier than now) and fires every timer that
// came due, earliest first.
func (f *FakeTimeSource) Update(t time.Time) {
	f.move(func(time.Time) time.Time { return t })
}

// move sets the clock to next(now) in one step, so concurrent Advance calls add up.
func (f *FakeTimeSource) move(next func(now time.Time) time.Time) {
	f.mu.Lock()
	t := next(f.now)
	if t.Before(f.now) {
		f.mu.Unlock()
		panic("clock: FakeTimeSource cannot move backwards")
	}
	f.now = t
	var due []*fakeTimer
	kept := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.deadline.After(t) {
			due = append(due, tm)
		} else {
			kept = append(kept, tm)
		}
	}
	f.timers = kept
	f.mu.Unlock()

	sortTimers(due)
	for _, tm := range due {
		tm.fire(t)
	}
}

// AfterFunc implements TimeSource.
func (f *FakeTimeSource) AfterFunc(d time.Duration, fn func()) Timer {
	return f.add(d, &fakeTimer{fn: fn})
}

// NewTimer implements TimeSource.
func (f *FakeTimeSource) NewTimer(d time.Duration) (<-chan time.Time, Timer) {
	ch := make(chan time.Time, 1)
	tm := f.add(d, &fakeTimer{ch: ch})
	return ch, tm
}

// NewTimerAt implements TimeSource.
func (f *FakeTimeSource) NewTimerAt(deadline time.Time) (<-chan time.Time, Timer) {
	ch := make(chan time.Time, 1)
	tm := &fakeTimer{ch: ch, source: f, deadline: deadline}
	f.mu.Lock()
	if !deadline.After(f.now) {
		now := f.now
		f.mu.Unlock()
		tm.fire(now)
		return ch, tm
	}
	f.timers = append(f.timers, tm)
	f.mu.Unlock()
	return ch, tm
}

// PendingTimers reports how many timers have not fired or been stopped.
func (f *FakeTimeSource) PendingTimers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

func (f *FakeTimeSource) add(d time.Duration, tm *fakeTimer) *fakeTimer {
	f.mu.Lock()
	tm.source = f
	tm.deadline = f.now.Add(d)
	if d <= 0 {
		f.mu.Unlock()
		tm.fire(f.Now())
		return tm
	}
	f.timers = append(f.timers, tm)
	f.mu.Unlock()
	return tm
}

type fakeTimer struct {
	source   *FakeTimeSource
	deadline time.Time
	fn       func()
	ch       chan time.Time
}

func (t *fakeTimer) fire(now time.Time) {
	if t.fn != nil {
		go t.fn()
		return
	}
	select {
	case t.ch <- now:
	default:
	}
}

func (t *fakeTimer) Stop() bool {
	f := t.source
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, tm := range f.timers {
		if tm == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			return true
		}
	}
	return false
}

func sortTimers(ts []*fakeTimer) {
	slices.SortStableFunc(ts, func(a, b *fakeTimer) int { return a.deadline.Compare(b.deadline) })
}

// RuntimeFramer is what a TimeSource whose readings are not the runtime's clock may also
// offer: the instant of its own clock that a runtime-clock instant is. A context's deadline is
// always on the runtime's clock (gRPC turns a caller's timeout into one with time.Now), which
// is the real and the fake TimeSources' frame as far as their comparisons go; a test hook that
// offsets a host's clock implements it so that the host's comparisons stay in one frame, as
// on a real host whose clock is off, where both are the same clock.
type RuntimeFramer interface {
	FromRuntime(t time.Time) time.Time
}

// DeadlineOf returns ctx's deadline in ts's frame (RuntimeFramer), to be compared with
// ts.Now(). Component code compares a context's deadline with its TimeSource only through it.
func DeadlineOf(ctx context.Context, ts TimeSource) (time.Time, bool) {
	deadline, ok := ctx.Deadline()
	if f, framed := ts.(RuntimeFramer); ok && framed {
		deadline = f.FromRuntime(deadline)
	}
	return deadline, ok
}
