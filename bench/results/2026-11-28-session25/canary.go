//go:build ignore

// canary measures how fast this box is, second by second, beside a benchmark: every period
// it does a fixed amount of work and prints the thread CPU time that work took. The work has
// a compute part (SHA-256 over a buffer that stays in L1/L2) and a memory part (a pointer
// chase through a 64 MiB random cycle, which misses every cache level). Thread CPU time does
// not count time the canary was preempted, so a busy core does not make it look slow; what
// does is a slower core: another tenant's load, a lower clock, or a contended memory system.
//
//	go run canary.go -period 1s > canary.log   # t_unix compute_us memory_us
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func main() {
	period := flag.Duration("period", time.Second, "time between measurements")
	hashes := flag.Int("hashes", 40, "SHA-256 passes over a 16 KiB buffer per measurement")
	steps := flag.Int("steps", 20000, "pointer-chase steps through 64 MiB per measurement")
	flag.Parse()
	runtime.LockOSThread()

	buf := make([]byte, 16<<10)
	const n = 8 << 20 // 8 Mi uint64 = 64 MiB
	next := make([]uint64, n)
	perm := rand.Perm(n)
	for i := range n {
		next[perm[i]] = uint64(perm[(i+1)%n])
	}
	var sink uint64
	for {
		t0 := threadCPU()
		for range *hashes {
			sum := sha256.Sum256(buf)
			buf[0] = sum[0]
		}
		t1 := threadCPU()
		p := sink % n
		for range *steps {
			p = next[p]
		}
		sink = p
		t2 := threadCPU()
		fmt.Fprintf(os.Stdout, "%.1f %d %d\n", float64(time.Now().UnixMilli())/1000, (t1 - t0).Microseconds(), (t2 - t1).Microseconds())
		time.Sleep(*period)
	}
}
