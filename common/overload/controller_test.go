package overload

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/metrics"
)

type controllerBundle struct {
	a  *Controller
	ts *clock.FakeTimeSource
}

// newControllerBundle returns a Controller with a fixed in-flight limit (no adaptation) and no
// queue delay cap beyond the callers' deadlines.
func newControllerBundle(t *testing.T, inFlight, maxQueued, maxBytes int) controllerBundle {
	return newControllerBundleWith(t, Config{
		MaxInFlightPerShard: func() int { return inFlight },
		MaxQueued:           func() int { return maxQueued },
		MaxQueuedBytes:      func() int { return maxBytes },
	})
}

// newControllerBundleWith fills the fields cfg leaves nil: limits 1..1, no adaptation, no queue
// delay cap, room for 100 calls.
func newControllerBundleWith(t *testing.T, cfg Config) controllerBundle {
	ts := clock.NewFakeTimeSource()
	// Near the wall clock, so contexts' real deadlines compare sensibly with the fake now.
	ts.Update(time.Now())
	intOr := func(f func() int, v int) func() int {
		if f == nil {
			return func() int { return v }
		}
		return f
	}
	durOr := func(f func() time.Duration) func() time.Duration {
		if f == nil {
			return func() time.Duration { return 0 }
		}
		return f
	}
	cfg.MaxInFlightPerShard = intOr(cfg.MaxInFlightPerShard, 1)
	cfg.MinInFlightPerShard = intOr(cfg.MinInFlightPerShard, 1)
	cfg.MaxQueued = intOr(cfg.MaxQueued, 100)
	cfg.MaxQueuedBytes = intOr(cfg.MaxQueuedBytes, 1<<20)
	cfg.TargetLatency = durOr(cfg.TargetLatency)
	cfg.MaxQueueDelay = durOr(cfg.MaxQueueDelay)
	if cfg.HeartbeatMaxQueueDelay == nil {
		// The tests of refusals past the cap use heartbeats: the same cap, unless a test says.
		cfg.HeartbeatMaxQueueDelay = cfg.MaxQueueDelay
	}
	if cfg.EarlyRefusalTargetWait == nil {
		cfg.EarlyRefusalTargetWait = func() time.Duration { return 500 * time.Millisecond }
	}
	if cfg.BehindDelay == nil {
		cfg.BehindDelay = func() time.Duration { return 2 * time.Second }
	}
	if cfg.BehindRefusedShare == nil {
		cfg.BehindRefusedShare = func() float64 { return 0.01 }
	}
	return controllerBundle{a: New(cfg, ts, tally.NoopScope), ts: ts}
}

// within moves the host's clock to left before ctx's deadline: a deadline that short on the
// wall clock could run out on a busy machine before the call even reached admission.
func (b controllerBundle) within(ctx context.Context, left time.Duration) {
	deadline, _ := ctx.Deadline()
	b.ts.Update(deadline.Add(-left))
}

func longCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	t.Cleanup(cancel)
	return ctx
}

// admitAsync starts an Admit and returns where its outcome arrives.
func admitAsync(ctx context.Context, a *Controller, shardID int32, class Class) <-chan error {
	out := make(chan error, 1)
	go func() {
		release, err := a.Admit(ctx, shardID, class, 100)
		if err == nil {
			release()
		}
		out <- err
	}()
	return out
}

func waitQueued(t *testing.T, a *Controller, n int) {
	t.Helper()
	require.Eventually(t, func() bool { calls, _ := a.Queued(); return calls == n }, 10*time.Second, time.Millisecond)
}

func TestController(t *testing.T) {
	t.Parallel()

	t.Run("BoundsWorkInFlightPerShard", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 1, 100, 1<<20)
		release, err := b.a.Admit(longCtx(t), 3, ClassHeartbeat, 100)
		require.NoError(t, err)
		// Another shard has its own slots.
		other, err := b.a.Admit(longCtx(t), 4, ClassHeartbeat, 100)
		require.NoError(t, err)
		other()

		waiting := admitAsync(longCtx(t), b.a, 3, ClassHeartbeat)
		waitQueued(t, b.a, 1)
		release()
		require.NoError(t, <-waiting)
		waitQueued(t, b.a, 0)
	})

	t.Run("RegistrationsLeaveAQuarterOfTheSlotsToHeartbeats", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 8, 100, 1<<20)
		var releases []func()
		for range 6 {
			release, err := b.a.Admit(longCtx(t), 0, ClassRegistration, 100)
			require.NoError(t, err)
			releases = append(releases, release)
		}
		// Two slots are free, but they are kept for heartbeats: a seventh registration waits.
		waiting := admitAsync(longCtx(t), b.a, 0, ClassRegistration)
		waitQueued(t, b.a, 1)
		for range 2 {
			release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
			require.NoError(t, err, "a heartbeat takes a free slot while registrations wait")
			defer release()
		}
		releases[0]()
		require.NoError(t, <-waiting, "a registration's freed slot goes to the next registration")
		waitQueued(t, b.a, 0)
		for _, release := range releases[1:] {
			release()
		}
	})

	t.Run("ServesHeartbeatsBeforeRegistrationsAndRefusesReadsWhileTheyWait", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 1, 100, 1<<20)
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)

		// Hold the slot of whoever is served first, to see the order.
		order := make(chan Class, 2)
		hold := make(chan struct{})
		admitAndRecord := func(class Class) {
			go func() {
				r, err := b.a.Admit(longCtx(t), 0, class, 100)
				if err != nil {
					return
				}
				order <- class
				<-hold
				r()
			}()
		}
		admitAndRecord(ClassRegistration)
		waitQueued(t, b.a, 1)
		admitAndRecord(ClassHeartbeat)
		waitQueued(t, b.a, 2)

		_, err = b.a.Admit(longCtx(t), 0, ClassRead, 100)
		var exhausted *serviceerror.ResourceExhausted
		require.ErrorAs(t, err, &exhausted)

		release()
		require.Equal(t, ClassHeartbeat, <-order)
		close(hold)
		require.Equal(t, ClassRegistration, <-order)
	})

	t.Run("RefusesAtOnceWhatCannotBeServedBeforeTheDeadline", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 1, 100, 1<<20)
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		defer release()
		for range 10 {
			admitAsync(longCtx(t), b.a, 0, ClassHeartbeat)
		}
		waitQueued(t, b.a, 10)

		// Eleven calls of about 5ms each are ahead; 20ms is not enough. (The deadline is a
		// second away on the wall clock, which a busy machine cannot overrun before the call
		// arrives; the host's clock is 20ms before it.)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		b.within(ctx, 20*time.Millisecond)
		_, err = b.a.Admit(ctx, 0, ClassHeartbeat, 100)
		var exhausted *serviceerror.ResourceExhausted
		require.ErrorAs(t, err, &exhausted)
		require.Contains(t, err.Error(), "is behind")
	})

	t.Run("RefusesAtOnceWhatWouldWaitLongerThanTheQueueDelayCap", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundleWith(t, Config{MaxQueueDelay: func() time.Duration { return 30 * time.Millisecond }})
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		defer release()
		for range 5 {
			admitAsync(longCtx(t), b.a, 0, ClassHeartbeat)
		}
		waitQueued(t, b.a, 5)

		// An hour to spare, but six calls of about 5ms each are ahead: over the 30ms cap.
		for i := range behindMinRefused {
			if i == 1 {
				require.False(t, b.a.Behind(), "one refusal is no sign of being behind")
			}
			_, err = b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
			var exhausted *serviceerror.ResourceExhausted
			require.ErrorAs(t, err, &exhausted)
		}
		// Refused heartbeats, a real share of the recent ones, make the host behind for the
		// expiry brake.
		require.True(t, b.a.Behind())
	})

	// A heartbeat that reached admission has been read and decoded already, a registration
	// (the first heartbeat of a key) included: it waits longer than a read before it is
	// refused (history.admissionHeartbeatMaxQueueDelay).
	t.Run("LetsHeartbeatsAndRegistrationsWaitLongerThanReads", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundleWith(t, Config{
			MaxQueueDelay:          func() time.Duration { return 30 * time.Millisecond },
			HeartbeatMaxQueueDelay: func() time.Duration { return 102 * time.Millisecond },
		})
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		for range 5 {
			admitAsync(longCtx(t), b.a, 0, ClassRead)
		}
		waitQueued(t, b.a, 5)

		// Six calls of 5ms each are ahead of a read, over the 30ms cap: it is refused. Ahead of
		// a registration are none of them (reads come last), and it waits.
		_, err = b.a.Admit(longCtx(t), 0, ClassRead, 100)
		var exhausted *serviceerror.ResourceExhausted
		require.ErrorAs(t, err, &exhausted, "a read")
		for range 5 {
			admitAsync(longCtx(t), b.a, 0, ClassHeartbeat)
		}
		registration := admitAsync(longCtx(t), b.a, 0, ClassRegistration)
		waitQueued(t, b.a, 11)

		// Registrations wait up to the heartbeats' cap: 19 writes ahead are 105ms.
		for range 13 {
			admitAsync(longCtx(t), b.a, 0, ClassHeartbeat)
		}
		waitQueued(t, b.a, 24)
		_, err = b.a.Admit(longCtx(t), 0, ClassRegistration, 100)
		require.ErrorAs(t, err, &exhausted, "a registration past the heartbeats' cap")

		release()
		require.NoError(t, <-registration, "the registration is served in its turn")
	})

	t.Run("CountsTheHostBehindWhileItRefusesHeartbeats", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundleWith(t, Config{MaxQueueDelay: func() time.Duration { return 30 * time.Millisecond }})
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		var waiting []<-chan error
		for range 5 {
			waiting = append(waiting, admitAsync(longCtx(t), b.a, 0, ClassHeartbeat))
		}
		waitQueued(t, b.a, 5)
		for range 10 {
			_, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
			var exhausted *serviceerror.ResourceExhausted
			require.ErrorAs(t, err, &exhausted)
		}
		release()
		for _, w := range waiting {
			require.NoError(t, <-w)
		}
		serve := func(n int) {
			for range n {
				r, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
				require.NoError(t, err)
				r()
			}
		}
		// Served heartbeats are quick again, but 10 of the last few seconds' ~165 were refused:
		// still behind.
		serve(150)
		require.True(t, b.a.Behind())
		// Once refusals are rare among the recent heartbeats, the host has caught up.
		serve(1000)
		require.False(t, b.a.Behind())
		// The window passes: the refusals of long ago count no more.
		b.ts.Advance(6 * time.Second)
		require.False(t, b.a.Behind())
	})

	// A fleet's passing burst of a few refusals is not "behind": it would hold every expiry
	// for another lease after the catch-up.
	t.Run("AFewRefusalsAreNotBehind", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundleWith(t, Config{MaxQueueDelay: func() time.Duration { return 30 * time.Millisecond }})
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		var waiting []<-chan error
		for range 5 {
			waiting = append(waiting, admitAsync(longCtx(t), b.a, 0, ClassHeartbeat))
		}
		waitQueued(t, b.a, 5)
		for range behindMinRefused - 1 {
			_, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
			var exhausted *serviceerror.ResourceExhausted
			require.ErrorAs(t, err, &exhausted)
		}
		release()
		for _, w := range waiting {
			require.NoError(t, <-w)
		}
		require.False(t, b.a.Behind())
	})

	t.Run("ServesFewerAtOnceWhileWritesAreSlowAndMoreOnceTheyAreQuick", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundleWith(t, Config{
			MinInFlightPerShard: func() int { return 2 },
			MaxInFlightPerShard: func() int { return 8 },
			TargetLatency:       func() time.Duration { return 100 * time.Millisecond },
		})
		require.Equal(t, 8, b.a.InFlightLimit(), "starts open")

		// Slow writes: every call holds its slot for a second.
		for b.a.InFlightLimit() > 2 {
			var releases []func()
			for range b.a.InFlightLimit() {
				r, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
				require.NoError(t, err)
				releases = append(releases, r)
			}
			b.ts.Advance(time.Second)
			for _, r := range releases {
				r()
			}
		}
		require.Equal(t, 2, b.a.InFlightLimit(), "shrinks to the floor")

		// At the floor, a third call waits.
		r1, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		r2, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		// Four more wait; once admitted, each holds its slot until hold closes.
		hold := make(chan struct{})
		admitted := make(chan error, 4)
		for range 4 {
			go func() {
				r, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
				admitted <- err
				if err == nil {
					<-hold
					r()
				}
			}()
		}
		waitQueued(t, b.a, 4)

		// Quick writes while calls wait: the limit grows.
		r1() // its slot goes to the first waiter
		require.NoError(t, <-admitted)
		for i := 0; b.a.InFlightLimit() == 2; i++ {
			require.Less(t, i, 100, "the limit grows while writes are quick and calls wait")
			r, err := b.a.Admit(longCtx(t), 1, ClassHeartbeat, 100) // another shard, same host limit
			require.NoError(t, err)
			b.ts.Advance(50 * time.Millisecond)
			r()
		}
		require.Equal(t, 3, b.a.InFlightLimit())
		// A release hands out every slot the growth opened, not just its own: two waiters.
		r2()
		require.NoError(t, <-admitted)
		require.NoError(t, <-admitted)
		waitQueued(t, b.a, 1)
		close(hold)
		require.NoError(t, <-admitted)
		waitQueued(t, b.a, 0)
	})
	t.Run("DropsCallsWhoseDeadlinePassed", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 1, 100, 1<<20)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		cancel()
		_, err := b.a.Admit(ctx, 0, ClassHeartbeat, 100)
		var canceled *serviceerror.Canceled
		require.ErrorAs(t, err, &canceled)

		// A waiting call whose caller leaves is taken out of the queue, unserved.
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
		waiting := admitAsync(ctx, b.a, 0, ClassHeartbeat)
		waitQueued(t, b.a, 1)
		cancel()
		require.ErrorAs(t, <-waiting, &canceled)
		waitQueued(t, b.a, 0)
		release()
		// The slot is free again.
		r, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		r()
	})

	t.Run("CapsQueuedCallsAndBytes", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 1, 2, 250)
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		defer release()
		admitAsync(longCtx(t), b.a, 0, ClassHeartbeat)
		admitAsync(longCtx(t), b.a, 0, ClassHeartbeat)
		waitQueued(t, b.a, 2)
		_, err = b.a.Admit(longCtx(t), 0, ClassHeartbeat, 1)
		var exhausted *serviceerror.ResourceExhausted
		require.ErrorAs(t, err, &exhausted)
		require.Contains(t, err.Error(), "queue is full")
		_, bytes := b.a.Queued()
		require.Equal(t, 200, bytes)
	})
}

// TestAdaptiveLimit moves the limit on a fake timeline: a quarter down per slow window, one up
// per quick window in which calls had to wait, within its bounds.
func TestAdaptiveLimit(t *testing.T) {
	t.Parallel()
	const lo, hi, target = 2, 32, 100 * time.Millisecond
	var l adaptiveLimit
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	window := func(took time.Duration, saturated bool) int {
		if saturated {
			l.markSaturated()
		}
		for range adaptiveMinSamples {
			now = now.Add(adaptiveWindow/(adaptiveMinSamples-1) + time.Millisecond)
			l.observe(now, took, lo, hi, target)
		}
		return l.current(lo, hi, target)
	}
	require.Equal(t, hi, l.current(lo, hi, target), "starts at the ceiling")
	require.Equal(t, 24, window(time.Second, true))
	require.Equal(t, 18, window(time.Second, false))
	for range 20 {
		window(time.Second, true)
	}
	require.Equal(t, lo, l.current(lo, hi, target), "never below the floor")

	require.Equal(t, lo, window(10*time.Millisecond, false), "quick but unsaturated: no growth")
	require.Equal(t, lo+1, window(10*time.Millisecond, true))
	require.Equal(t, lo+2, window(10*time.Millisecond, true))
	for range 50 {
		window(10*time.Millisecond, true)
	}
	require.Equal(t, hi, l.current(lo, hi, target), "never above the ceiling")

	// Too few samples make no window, however long it lasts.
	l.observe(now.Add(time.Hour), time.Hour, lo, hi, target)
	require.Equal(t, hi, l.current(lo, hi, target))

	// Without a target the limit is the ceiling.
	var fixed adaptiveLimit
	fixed.observe(now, time.Hour, lo, hi, 0)
	require.Equal(t, hi, fixed.current(lo, hi, 0))
}

func TestControllerPressure(t *testing.T) {
	t.Parallel()

	t.Run("EstimatedWaitFollowsTheWritesQueued", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 1, 100, 1<<20)
		require.Zero(t, b.a.EstimatedWait(), "nothing queued")
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		require.Zero(t, b.a.EstimatedWait(), "a call in its slot is not a queue")

		var waiting []<-chan error
		for range 4 {
			waiting = append(waiting, admitAsync(longCtx(t), b.a, 0, ClassRegistration))
		}
		waitQueued(t, b.a, 4)
		// Four writes for one slot, each taking the 5ms assumed before any was measured.
		require.Equal(t, 20*time.Millisecond, b.a.EstimatedWait())

		release()
		for _, w := range waiting {
			require.NoError(t, <-w)
		}
		waitQueued(t, b.a, 0)
		require.Zero(t, b.a.EstimatedWait(), "the queue drained")
	})

	t.Run("WaitBehindSpreadsTheWritesOnTheirWayOverTheSlots", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 2, 100, 1<<20)
		require.Zero(t, b.a.waitBehind(1000), "nothing measured yet")
		// Two shards, two slots each; a write holds its slot 5ms.
		var releases []func()
		for _, shard := range []int32{0, 1} {
			release, err := b.a.Admit(longCtx(t), shard, ClassHeartbeat, 100)
			require.NoError(t, err)
			releases = append(releases, release)
		}
		b.ts.Advance(5 * time.Millisecond)
		for _, release := range releases {
			release()
		}
		require.Zero(t, b.a.waitBehind(4), "four slots take four writes at once")
		// Eight more, four slots, 5ms each: 10ms.
		require.Equal(t, 10*time.Millisecond, b.a.waitBehind(12))
	})

	t.Run("EarlyRefusalsMakeTheHostBehindForTheBrake", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 4, 100, 1<<20)
		for range 100 {
			release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
			require.NoError(t, err)
			release()
		}
		require.False(t, b.a.Behind(), "every heartbeat was served at once")

		// The frontend refused as many before they reached history.
		b.a.RefusedEarly(100)
		require.True(t, b.a.Behind(), "half the heartbeats were refused: the host is behind, whoever refused them")
	})

	// Heartbeats that waited before history saw them (in the socket, behind their clients'
	// retries) are served at once, but renew leases that have almost run out.
	t.Run("LateRenewalsMakeTheHostBehind", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 4, 100, 1<<20)
		serve := func(n, late int) {
			for i := range n {
				release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
				require.NoError(t, err)
				release()
				if i < late {
					b.a.RenewedLate()
				}
			}
		}
		serve(1000, behindMinRefused-1)
		require.False(t, b.a.Behind(), "a few workers missed a beat")
		serve(100, 20)
		require.True(t, b.a.Behind(), "2% of the heartbeats renewed their leases late")
		require.True(t, b.a.LocalBehind(), "and the host tells the cluster so")
		b.ts.Advance(6 * time.Second)
		serve(1000, 0)
		require.False(t, b.a.Behind(), "heartbeats on time again")
	})
}

// TestControllerQueuedGauge: once the queue is empty, the exported queue reads empty, however
// its callers raced. The gauge was once set after the lock was let go: a waiter granted with
// another still queued could be slow to set its count, set it after the other had left and
// emptied the queue, and the gauge then read one call queued for good.
func TestControllerQueuedGauge(t *testing.T) {
	t.Parallel()
	scope := &pausableScope{Scope: tally.NewTestScope("", nil), gauge: metrics.AdmissionQueued.Name()}
	b := newControllerBundle(t, 1, 100, 1<<20)
	b.a = New(b.a.cfg, b.ts, scope)

	hold, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
	require.NoError(t, err)
	first := admitAsync(longCtx(t), b.a, 0, ClassHeartbeat)
	waitQueued(t, b.a, 1)
	secondCtx, leave := context.WithCancel(longCtx(t))
	second := admitAsync(secondCtx, b.a, 0, ClassHeartbeat)
	waitQueued(t, b.a, 2)

	// The first waiter is granted with the second still queued; its setting of the gauge is
	// slow. Meanwhile the second leaves, and the queue is empty.
	paused := scope.pauseNext()
	go hold()
	<-paused
	leave()
	select {
	case err := <-second:
		require.Error(t, err, "the second waiter left, yet was served")
		waitQueued(t, b.a, 0)
		scope.resume()
	case <-time.After(100 * time.Millisecond):
		// Held up behind the paused update: the count and its gauge change together.
		scope.resume()
		require.Error(t, <-second, "the second waiter left, yet was served")
	}
	require.NoError(t, <-first)
	calls, _ := b.a.Queued()
	require.Zero(t, calls)
	require.Zero(t, scope.value(), "the queued gauge is stale")
}

// pausableScope is a metrics scope whose named gauge can be made to pause in its next Update,
// until resumed: a slow metrics path, on demand.
type pausableScope struct {
	tally.Scope
	gauge string

	mu      sync.Mutex
	armed   chan struct{} // closed when the next update pauses
	release chan struct{}
	last    float64
}

func (s *pausableScope) Gauge(name string) tally.Gauge {
	if name != s.gauge {
		return s.Scope.Gauge(name)
	}
	return pausableGauge{s}
}

func (s *pausableScope) pauseNext() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.release = make(chan struct{}), make(chan struct{})
	return s.armed
}

func (s *pausableScope) resume() { close(s.release) }

func (s *pausableScope) value() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

type pausableGauge struct{ s *pausableScope }

func (g pausableGauge) Update(v float64) {
	g.s.mu.Lock()
	armed, release := g.s.armed, g.s.release
	g.s.armed = nil
	g.s.mu.Unlock()
	if armed != nil {
		close(armed)
		<-release
	}
	g.s.mu.Lock()
	g.s.last = v
	g.s.mu.Unlock()
}

func TestControllerYieldToCalls(t *testing.T) {
	t.Parallel()

	yieldAsync := func(a *Controller, ctx context.Context, most time.Duration) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			a.YieldToCalls(ctx, most)
			close(done)
		}()
		return done
	}

	t.Run("ReturnsAtOnceWhileNoCallWaits", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 1, 100, 1<<20)
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		defer release()
		// A call in flight is not a call waiting: background work goes on beside it.
		<-yieldAsync(b.a, longCtx(t), time.Hour)
	})

	t.Run("WaitsUntilTheWaitingCallsAreServed", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 1, 100, 1<<20)
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		waiting := admitAsync(longCtx(t), b.a, 0, ClassRegistration)
		waitQueued(t, b.a, 1)

		yielded := yieldAsync(b.a, longCtx(t), time.Hour)
		select {
		case <-yielded:
			t.Fatal("background work went ahead of a registration waiting for a slot")
		case <-time.After(20 * time.Millisecond):
		}
		release()
		require.NoError(t, <-waiting)
		<-yielded
	})

	t.Run("WaitsNoLongerThanItsBound", func(t *testing.T) {
		t.Parallel()
		b := newControllerBundle(t, 1, 100, 1<<20)
		scope := tally.NewTestScope("", nil)
		b.a = New(b.a.cfg, b.ts, scope)
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		defer release()
		ctx, cancel := context.WithCancel(longCtx(t))
		defer cancel()
		waiting := admitAsync(ctx, b.a, 0, ClassHeartbeat)
		waitQueued(t, b.a, 1)

		// An overload that never drains still lets background work run, after the bound.
		yielded := yieldAsync(b.a, longCtx(t), time.Second)
		require.Eventually(t, func() bool { return b.ts.PendingTimers() > 0 }, 10*time.Second, time.Millisecond)
		b.ts.Advance(time.Second)
		<-yielded
		held := scope.Snapshot().Timers()[metrics.OutboundYieldDelay.Name()+"+"]
		require.NotNil(t, held, "the hold is timed")
		require.Equal(t, []time.Duration{time.Second}, held.Values())

		// And a stopping queue is not held.
		stopping, stop := context.WithCancel(longCtx(t))
		stopped := yieldAsync(b.a, stopping, time.Hour)
		stop()
		<-stopped
		cancel()
		require.Error(t, <-waiting, "the waiting call gave up, unserved")
	})
}

// The early refusal rule, with the host's queue set directly: each write queued or on its
// way adds perWrite to the wait a new heartbeat meets.
func TestControllerRefuseEarly(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T, target time.Duration) controllerBundle {
		return newControllerBundleWith(t, Config{EarlyRefusalTargetWait: func() time.Duration { return target }})
	}
	// refusedOf judges n heartbeats after the wait they meet has stood for two standing
	// intervals, as a queue that stays: the share applies only to one.
	refusedOf := func(b controllerBundle, n, outstanding int, left time.Duration) int {
		for range 2 {
			b.ts.Advance(standingInterval)
			b.a.RefuseEarly(outstanding, left)
		}
		refused := 0
		for range n {
			if b.a.RefuseEarly(outstanding, left) {
				refused++
			}
		}
		return refused
	}

	// Past the target a share of heartbeats is refused, growing with the excess wait, rather
	// than all of them: refusing all or nothing made the load oscillate.
	t.Run("RefusesAShareGrowingWithTheExcessWait", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 400*time.Millisecond)
		for _, c := range []struct {
			wait    time.Duration
			refused int // of 1,000 heartbeats
		}{
			{0, 0},
			{400 * time.Millisecond, 0}, // at the target: none
			{500 * time.Millisecond, 250},
			{600 * time.Millisecond, 500},
			{700 * time.Millisecond, 750},
			{800 * time.Millisecond, 1000}, // twice the target: all
			{time.Minute, 1000},
		} {
			b.a.writeWait.Store(int64(c.wait))
			require.InDelta(t, c.refused, refusedOf(b, 1000, 0, 0), 1, "estimated wait %v", c.wait)
		}
	})

	// Every heartbeat is judged against the same target, whatever its deadline: only one
	// that would wait past its deadline is refused for that.
	t.Run("JudgesEveryHeartbeatAgainstTheTarget", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 500*time.Millisecond)
		b.a.writeWait.Store(int64(3 * time.Second))
		require.Equal(t, 100, refusedOf(b, 100, 0, 0), "no deadline")
		require.Equal(t, 100, refusedOf(b, 100, 0, 10*time.Second), "a long deadline")
		b.a.writeWait.Store(int64(750 * time.Millisecond))
		require.InDelta(t, 50, refusedOf(b, 100, 0, 10*time.Second), 2, "half-way to twice the target")
	})

	// A heartbeat that would wait past its own deadline is refused whatever the share, below
	// the target too: let through, admission would refuse it after reading it.
	t.Run("RefusesWhatWouldWaitPastItsDeadline", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 400*time.Millisecond)
		require.Zero(t, refusedOf(b, 100, 0, 50*time.Millisecond), "nothing queued")
		b.a.writeWait.Store(int64(300 * time.Millisecond))
		require.Zero(t, refusedOf(b, 100, 0, 10*time.Second))
		require.Equal(t, 100, refusedOf(b, 100, 0, 250*time.Millisecond))
	})

	// Heartbeats let through but not yet queued (being read, decoded, authorized) count in the
	// wait a new one would meet: the queue alone cannot see a burst on its way.
	t.Run("CountsTheHeartbeatsOnTheirWay", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 500*time.Millisecond)
		b.a.slots.Store(4)
		b.a.perWrite.Store(int64(100 * time.Millisecond))
		require.Zero(t, refusedOf(b, 100, 9, 0), "five past the slots: 500ms, the target")
		require.Equal(t, 100, refusedOf(b, 100, 14, 0), "ten past them: 1s, twice the target")
	})

	// A burst fills the queue for less than the standing interval and drains within its
	// callers' deadlines: it is let through, as CoDel lets a burst through. Only the wait that
	// stays past the interval is refused.
	t.Run("LetsABurstThrough", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 500*time.Millisecond)
		judge := func(n int) (refused int) {
			for range n {
				if b.a.RefuseEarly(0, 10*time.Second) {
					refused++
				}
			}
			return refused
		}
		b.a.writeWait.Store(int64(3 * time.Second))
		require.Zero(t, judge(100), "the queue has just filled")
		b.ts.Advance(standingInterval / 2)
		require.Zero(t, judge(100), "half an interval later")
		b.a.writeWait.Store(0)
		require.Zero(t, judge(1), "it drained")
		b.a.writeWait.Store(int64(3 * time.Second))
		require.Zero(t, judge(100), "filled again")
		b.ts.Advance(standingInterval)
		require.Zero(t, judge(100), "an interval later, but it drained in the interval before")
		b.ts.Advance(standingInterval)
		require.Equal(t, 100, judge(100), "it stood a whole interval above twice the target")
		require.Equal(t, 10, func() int {
			refused := 0
			for range 10 {
				if b.a.RefuseEarly(0, 2*time.Second) {
					refused++
				}
			}
			return refused
		}(), "the deadline rule does not wait for the interval")
	})

	t.Run("ZeroTargetTurnsItOff", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 0)
		b.a.writeWait.Store(int64(time.Hour))
		require.Zero(t, refusedOf(b, 100, 1000, time.Second))
	})
}

// A host is behind while another host of its cluster says it is: its membership renewal
// carries the word, and a host missing from the members says nothing.
func TestControllerBehindAcrossTheCluster(t *testing.T) {
	t.Parallel()
	b := newControllerBundle(t, 4, 100, 1<<20)
	other := newControllerBundle(t, 4, 100, 1<<20)
	require.False(t, b.a.Behind())
	require.JSONEq(t, `{"behind":false}`, string(other.a.Report()))

	other.a.RefusedEarly(100)
	require.True(t, other.a.LocalBehind())
	b.a.Received(map[string][]byte{"other": other.a.Report(), "old": []byte(`{"d":1}`), "bad": []byte("{")})
	require.True(t, b.a.Behind(), "another host is behind")
	require.False(t, b.a.LocalBehind())
	require.JSONEq(t, `{"behind":false}`, string(b.a.Report()), "what it reports is its own state")

	b.a.Received(map[string][]byte{})
	require.False(t, b.a.Behind(), "the other host left the cluster")
}
