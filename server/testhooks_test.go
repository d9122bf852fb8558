//go:build vigil_testhooks

package server

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
)

// TestClockOffsetHook: with the hook, every reading of the host's clock is the offset ahead,
// and a timer set for an instant on that clock fires at that instant of it.
func TestClockOffsetHook(t *testing.T) {
	t.Setenv(testHooksEnv, "renewal-signals,clock-offset=2s")
	fake := clock.NewFakeTimeSource()
	ts, err := testHookTimeSource(fake, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if got := ts.Now().Sub(fake.Now()); got != 2*time.Second {
		t.Fatalf("the host's clock is %v ahead, want 2s", got)
	}
	fired, _ := ts.NewTimerAt(ts.Now().Add(time.Second))
	fake.Advance(999 * time.Millisecond)
	select {
	case <-fired:
		t.Fatal("the timer fired before its instant")
	default:
	}
	fake.Advance(time.Millisecond)
	select {
	case <-fired:
	default:
		t.Fatal("the timer did not fire at its instant")
	}
	// A context's deadline, on the runtime's clock, is read on the host's offset clock: a call
	// with a second left has a second left by the host's clock too.
	ctx, cancel := context.WithDeadline(context.Background(), fake.Now().Add(time.Second))
	defer cancel()
	if d, _ := clock.DeadlineOf(ctx, ts); d.Sub(ts.Now()) != time.Second {
		t.Fatalf("a deadline a second away is %v away by the offset clock", d.Sub(ts.Now()))
	}
	t.Setenv(testHooksEnv, "clock-offset=soon")
	if _, err := testHookTimeSource(fake, zap.NewNop()); err == nil {
		t.Fatal("a malformed offset was accepted")
	}
}
