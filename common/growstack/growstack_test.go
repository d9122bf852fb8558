package growstack

import (
	"sync"
	"testing"
)

// deep recurses n frames of about 200 bytes each, like a call's path through interceptors,
// handlers and the in-process history call.
//
//go:noinline
func deep(n int) byte {
	var pad [160]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		return pad[0]
	}
	return deep(n-1) + pad[n%len(pad)]
}

// runFresh runs f on b.N fresh goroutines, one at a time, as grpc serves calls past its kept
// stream workers.
func runFresh(b *testing.B, f func()) {
	var wg sync.WaitGroup
	for b.Loop() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
		wg.Wait()
	}
}

// The stack a fresh goroutine needs 50 frames down (about 10 KiB): grown there by the runtime,
// or at the top by Grow. The gap is the cost Grow saves a heartbeat served on a new goroutine.
func BenchmarkFreshGoroutineDeepCall(b *testing.B) {
	b.Run("grown-where-needed", func(b *testing.B) {
		runFresh(b, func() { result = deep(50) })
	})
	b.Run("grown-at-the-top", func(b *testing.B) {
		runFresh(b, func() { Grow(); result = deep(50) })
	})
}

// Grow on a goroutine whose stack is already large: what every call on a kept stream worker
// pays.
func BenchmarkGrowOnGrownStack(b *testing.B) {
	Grow()
	for b.Loop() {
		Grow()
	}
}

// result keeps deep's work from being optimized away.
var result byte
