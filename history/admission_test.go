package history

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/common/clock"
)

type admissionBundle struct {
	a  *Admission
	ts *clock.FakeTimeSource
}

func newAdmissionBundle(t *testing.T, inFlight, maxQueued, maxBytes int, regRPS float64) admissionBundle {
	ts := clock.NewFakeTimeSource()
	// Near the wall clock, so contexts' real deadlines compare sensibly with the fake now.
	ts.Update(time.Now())
	cfg := AdmissionConfig{
		MaxInFlightPerShard:  func() int { return inFlight },
		MaxQueued:            func() int { return maxQueued },
		MaxQueuedBytes:       func() int { return maxBytes },
		RegistrationAdmitRPS: func() float64 { return regRPS },
	}
	return admissionBundle{a: NewAdmission(cfg, ts, tally.NoopScope, zaptest.NewLogger(t)), ts: ts}
}

func longCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	t.Cleanup(cancel)
	return ctx
}

// admitAsync starts an Admit and returns where its outcome arrives.
func admitAsync(ctx context.Context, a *Admission, shardID int32, class AdmissionClass) <-chan error {
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

func waitQueued(t *testing.T, a *Admission, n int) {
	t.Helper()
	require.Eventually(t, func() bool { calls, _ := a.Queued(); return calls == n }, 10*time.Second, time.Millisecond)
}

func TestAdmission(t *testing.T) {
	t.Parallel()

	t.Run("BoundsWorkInFlightPerShard", func(t *testing.T) {
		t.Parallel()
		b := newAdmissionBundle(t, 1, 100, 1<<20, 0)
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

	t.Run("ServesHeartbeatsBeforeRegistrationsAndRefusesReadsWhileTheyWait", func(t *testing.T) {
		t.Parallel()
		b := newAdmissionBundle(t, 1, 100, 1<<20, 0)
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)

		// Hold the slot of whoever is served first, to see the order.
		order := make(chan AdmissionClass, 2)
		hold := make(chan struct{})
		admitAndRecord := func(class AdmissionClass) {
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
		b := newAdmissionBundle(t, 1, 100, 1<<20, 0)
		release, err := b.a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
		require.NoError(t, err)
		defer release()
		for range 10 {
			admitAsync(longCtx(t), b.a, 0, ClassHeartbeat)
		}
		waitQueued(t, b.a, 10)

		// Eleven calls of about 5ms each are ahead; 20ms is not enough.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err = b.a.Admit(ctx, 0, ClassHeartbeat, 100)
		var exhausted *serviceerror.ResourceExhausted
		require.ErrorAs(t, err, &exhausted)
		require.Contains(t, err.Error(), "before its deadline")
	})

	t.Run("DropsCallsWhoseDeadlinePassed", func(t *testing.T) {
		t.Parallel()
		b := newAdmissionBundle(t, 1, 100, 1<<20, 0)
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
		b := newAdmissionBundle(t, 1, 2, 250, 0)
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

	t.Run("PacesRegistrationsWithinTheirDeadline", func(t *testing.T) {
		t.Parallel()
		b := newAdmissionBundle(t, 10, 100, 1<<20, 1)
		r, err := b.a.Admit(longCtx(t), 0, ClassRegistration, 100)
		require.NoError(t, err)
		r()

		// The next token is a second away: too late for a 100ms deadline...
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err = b.a.Admit(ctx, 0, ClassRegistration, 100)
		var exhausted *serviceerror.ResourceExhausted
		require.ErrorAs(t, err, &exhausted)
		require.Contains(t, err.Error(), "history.registrationAdmitRPS")

		// ...but a caller with time waits for it.
		waiting := admitAsync(longCtx(t), b.a, 0, ClassRegistration)
		require.Eventually(t, func() bool { return b.ts.PendingTimers() > 0 }, 10*time.Second, time.Millisecond)
		select {
		case err := <-waiting:
			t.Fatalf("registration admitted before its token: %v", err)
		default:
		}
		b.ts.Advance(time.Second)
		require.NoError(t, <-waiting)
	})
}
