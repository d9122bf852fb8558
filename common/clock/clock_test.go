package clock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFakeTimeSource(t *testing.T) {
	t.Run("TimersFireInDeadlineOrderWhenDue", func(t *testing.T) {
		f := NewFakeTimeSource()
		var mu sync.Mutex
		var fired []string
		done := make(chan struct{}, 2)
		record := func(name string) func() {
			return func() {
				mu.Lock()
				fired = append(fired, name)
				mu.Unlock()
				done <- struct{}{}
			}
		}
		f.AfterFunc(2*time.Second, record("late"))
		ch, _ := f.NewTimer(time.Second)
		f.AfterFunc(3*time.Second, record("never")).Stop()

		f.Advance(999 * time.Millisecond)
		select {
		case <-ch:
			t.Fatal("timer fired early")
		default:
		}
		f.Advance(time.Millisecond)
		require.Equal(t, f.Now(), <-ch)
		require.Equal(t, 1, f.PendingTimers(), "the stopped timer is gone")

		f.Advance(5 * time.Second)
		<-done
		require.Equal(t, []string{"late"}, fired)
		require.Zero(t, f.PendingTimers())
	})

	t.Run("ConcurrentAdvancesAddUp", func(t *testing.T) {
		f := NewFakeTimeSource()
		start := f.Now()
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.Advance(time.Second)
			}()
		}
		wg.Wait()
		require.Equal(t, start.Add(50*time.Second), f.Now())
	})

	t.Run("RefusesToGoBackwards", func(t *testing.T) {
		f := NewFakeTimeSource()
		require.Panics(t, func() { f.Update(f.Now().Add(-time.Nanosecond)) })
	})
}

func TestFakeNewTimerAt(t *testing.T) {
	f := NewFakeTimeSource()
	deadline := f.Now().Add(time.Second)
	f.Advance(2 * time.Second) // time moved before the timer was created
	ch, _ := f.NewTimerAt(deadline)
	select {
	case <-ch:
	default:
		t.Fatal("a timer at a past deadline fires at once")
	}
	ch, _ = f.NewTimerAt(f.Now().Add(time.Second))
	f.Advance(time.Second)
	select {
	case <-ch:
	default:
		t.Fatal("the timer did not fire at its deadline")
	}
}

// DeadlineOf returns a context's deadline as is for a TimeSource on the runtime's frame, and
// in the TimeSource's own frame for one that says how (RuntimeFramer).
func TestDeadlineOf(t *testing.T) {
	deadline := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if d, ok := DeadlineOf(ctx, NewFakeTimeSource()); !ok || !d.Equal(deadline) {
		t.Fatalf("DeadlineOf = %v, %v; want the context's deadline", d, ok)
	}
	if d, ok := DeadlineOf(ctx, framed{NewFakeTimeSource()}); !ok || !d.Equal(deadline.Add(time.Hour)) {
		t.Fatalf("DeadlineOf = %v, %v; want it in the TimeSource's frame", d, ok)
	}
	if _, ok := DeadlineOf(context.Background(), framed{NewFakeTimeSource()}); ok {
		t.Fatal("a context without a deadline has none")
	}
}

// framed is a TimeSource an hour ahead of the runtime's frame.
type framed struct{ *FakeTimeSource }

func (framed) FromRuntime(t time.Time) time.Time { return t.Add(time.Hour) }
