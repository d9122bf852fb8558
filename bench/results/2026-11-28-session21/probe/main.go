package main

import (
	"fmt"
	"math/rand"
	"time"
)

// Two fixed pieces of work: integer/branchy compute and a pointer chase over 64 MiB.
func main() {
	const n = 8 << 20
	next := make([]int32, n)
	perm := rand.Perm(n)
	for i := 0; i < n; i++ {
		next[perm[i]] = int32(perm[(i+1)%n])
	}
	for round := 0; round < 3; round++ {
		t := time.Now()
		x := uint64(1)
		for i := 0; i < 200_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
			if x&1 == 0 {
				x ^= x >> 7
			}
		}
		compute := time.Since(t)
		t = time.Now()
		p := int32(0)
		for i := 0; i < 4_000_000; i++ {
			p = next[p]
		}
		chase := time.Since(t)
		fmt.Printf("compute %v chase %v (%d %d)\n", compute.Round(time.Millisecond), chase.Round(time.Millisecond), x&1, p&1)
	}
}
