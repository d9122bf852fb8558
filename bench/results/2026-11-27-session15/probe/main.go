// probe: measures how much thread CPU time a fixed piece of work takes, every 2 s.
package main

import (
	"crypto/sha256"
	"fmt"
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
	t0 := time.Now()
	for {
		c0, w0 := threadCPU(), time.Now()
		for i := 0; i < 100; i++ {
			sink = sha256.Sum256(buf)
			buf[0] = sink[0]
		}
		c1, w1 := threadCPU(), time.Now()
		fmt.Printf("%.0f cpu_ms=%.2f wall_ms=%.2f\n", time.Since(t0).Seconds(), float64(c1-c0)/1e6, float64(w1.Sub(w0))/1e6)
		time.Sleep(2 * time.Second)
	}
}
