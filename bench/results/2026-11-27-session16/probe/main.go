// probe: thread CPU time of a fixed compute job (SHA-256) and of a memory-bound one
// (a random pointer chase over 64 MiB), every 2 s.
package main

import (
	"crypto/sha256"
	"fmt"
	"math/rand"
	"runtime"
	"syscall"
	"time"
)

func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	runtime.LockOSThread()
	buf := make([]byte, 64<<10)
	var sink [32]byte
	const n = 8 << 20 // 8M uint32 = 32 MiB... use 16M for 64 MiB
	next := make([]uint32, 2*n)
	perm := rand.Perm(len(next))
	for i := range perm {
		next[perm[i]] = uint32(perm[(i+1)%len(perm)])
	}
	t0 := time.Now()
	p := uint32(0)
	for {
		c0, w0 := threadCPU(), time.Now()
		for i := 0; i < 100; i++ {
			sink = sha256.Sum256(buf)
			buf[0] = sink[0]
		}
		c1, w1 := threadCPU(), time.Now()
		for i := 0; i < 100000; i++ {
			p = next[p]
		}
		c2, w2 := threadCPU(), time.Now()
		fmt.Printf("%.0f sha_cpu_ms=%.2f sha_wall_ms=%.2f chase_cpu_ms=%.2f chase_wall_ms=%.2f p=%d\n", time.Since(t0).Seconds(),
			float64(c1-c0)/1e6, float64(w1.Sub(w0))/1e6, float64(c2-c1)/1e6, float64(w2.Sub(w1))/1e6, p%2)
		time.Sleep(2 * time.Second)
	}
}
