package gcpacer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
)

const mib = 1 << 20

// fakeRuntime stands for the heap (what has been allocated, what the last cycle found live),
// the GOGC set, and the clock.
type fakeRuntime struct {
	s       sample
	percent int
	sets    int
	now     time.Time
}

// newTestPacer returns a pacer over a fake runtime whose live heap is live bytes.
func newTestPacer(interval time.Duration, maxExtra int, live uint64) (*Pacer, *fakeRuntime) {
	return newTestPacerWithFloor(interval, maxExtra, 0, live)
}

// newTestPacerWithFloor is newTestPacer with a MinExtra of minExtra bytes.
func newTestPacerWithFloor(interval time.Duration, maxExtra, minExtra int, live uint64) (*Pacer, *fakeRuntime) {
	rt := &fakeRuntime{percent: 100, s: sample{live: live}, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := newPacer(Config{
		TargetInterval: func() time.Duration { return interval },
		MaxExtra:       func() int { return maxExtra },
		MinExtra:       func() int { return minExtra },
	}, 100, tally.NoopScope)
	p.read = func() sample { return rt.s }
	p.procs = 2
	p.set = func(v int) int { old := rt.percent; rt.percent = v; rt.sets++; return old }
	return p, rt
}

// run steps the pacer every Every for d while the host allocates rate bytes a second.
func (rt *fakeRuntime) run(p *Pacer, d time.Duration, rate int) {
	for end := rt.now.Add(d); rt.now.Before(end); {
		rt.now = rt.now.Add(Every)
		rt.s.allocs += uint64(float64(rate) * Every.Seconds())
		p.apply(p.step(rt.now, p.read()))
	}
}

func TestPacer(t *testing.T) {
	t.Parallel()

	t.Run("RoomForTheTargetIntervalOfAllocation", func(t *testing.T) {
		t.Parallel()
		p, rt := newTestPacer(time.Second, 256*mib, 50*mib)
		// 150 MiB a second on a 50 MiB live heap: cycles a second apart need 150 MiB of room,
		// GOGC 300 (the runtime's default, 100, would run one every third of a second).
		rt.run(p, 5*time.Second, 150*mib)
		require.InDelta(t, 300, rt.percent, 30)
	})

	t.Run("RoomIsBoundedInBytes", func(t *testing.T) {
		t.Parallel()
		p, rt := newTestPacer(time.Second, 64*mib, 16*mib)
		rt.run(p, 5*time.Second, 500*mib)
		require.Equal(t, 400, rt.percent, "64 MiB above a 16 MiB live heap, however fast the host allocates")
	})

	t.Run("NeverBelowTheBaseAndBackToItWhenIdle", func(t *testing.T) {
		t.Parallel()
		p, rt := newTestPacer(time.Second, 256*mib, 200*mib)
		rt.run(p, 5*time.Second, 50*mib)
		require.Equal(t, 100, rt.percent, "a large live heap already leaves room for more than a second")
		require.Zero(t, rt.sets)

		rt.s.live = 20 * mib
		rt.run(p, 5*time.Second, 100*mib)
		require.Greater(t, rt.percent, 300)
		rt.run(p, 10*time.Second, 0)
		require.Equal(t, 100, rt.percent, "idle: the memory is not held for a rate that has gone")
	})

	t.Run("OnOneCoreTheFloorIsTwice", func(t *testing.T) {
		t.Parallel()
		// A large fleet's idle heap on a server of one P: marking shares the only core, so
		// cycles are spaced by twice the floor's room.
		p, rt := newTestPacerWithFloor(2*time.Second, 512*mib, 32*mib, 200*mib)
		p.procs = 1
		rt.run(p, 5*time.Second, 10*mib)
		require.Equal(t, 32, rt.percent, "64 MiB above 200 MiB")

		p, rt = newTestPacerWithFloor(2*time.Second, 512*mib, 32*mib, 200*mib)
		rt.run(p, 5*time.Second, 10*mib)
		require.Equal(t, 16, rt.percent, "32 MiB above 200 MiB with two cores")
	})

	t.Run("ALargeHeapIsGivenWhatItsAllocationNeeds", func(t *testing.T) {
		t.Parallel()
		// A large fleet's cached workers: 200 MiB live, 10 MiB a second allocated. GOGC 100
		// would hold 200 MiB more; cycles 2 s apart need 20, and the floor is 64.
		p, rt := newTestPacerWithFloor(2*time.Second, 512*mib, 64*mib, 200*mib)
		rt.run(p, 5*time.Second, 10*mib)
		require.Equal(t, 32, rt.percent, "64 MiB above 200 MiB")

		rt.run(p, 5*time.Second, 100*mib) // busy: 200 MiB of room for 2 s
		require.InDelta(t, 100, rt.percent, 10)
		rt.run(p, 5*time.Second, 200*mib)
		require.InDelta(t, 200, rt.percent, 20)
		rt.run(p, 10*time.Second, 0)
		require.InDelta(t, 32, rt.percent, 4, "idle again: back to the floor (within the tenth apply ignores)")

		rt.s.live = 40 * mib // the fleet left: a heap below the floor keeps the base
		rt.run(p, 2*time.Second, 0)
		require.Equal(t, 100, rt.percent)
	})

	t.Run("SmallChangesAreLeftAlone", func(t *testing.T) {
		t.Parallel()
		p, rt := newTestPacer(time.Second, 256*mib, 50*mib)
		rt.run(p, 5*time.Second, 150*mib)
		sets := rt.sets
		// The rate wobbles by a few percent from one step to the next.
		for i := range 40 {
			rt.run(p, Every, (150+3*(i%2))*mib)
		}
		require.Equal(t, sets, rt.sets)
	})

	t.Run("ZeroTurnsItOff", func(t *testing.T) {
		t.Parallel()
		p, rt := newTestPacer(0, 256*mib, 20*mib)
		rt.run(p, 5*time.Second, 500*mib)
		require.Equal(t, 100, rt.percent)
		require.Zero(t, rt.sets)
	})
}
