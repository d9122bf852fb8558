// Package heaptest measures the Go heap for benchmarks that report memory per item.
package heaptest

import "runtime"

// Live returns the bytes of heap in use just after a collection: what is still referenced.
// Read it before and after building a structure, with the structure kept alive until the
// second read (runtime.KeepAlive), and divide the difference by the items it holds.
func Live() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
