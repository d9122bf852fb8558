//go:build memdiag

package main

// A diagnostic build for memory work (bench/memory.sh, MEMDIAG): built with
//
//	go build -tags memdiag,memory.counters ./cmd/vigil
//
// the server answers on $VIGIL_MEMDIAG_ADDR (default 127.0.0.1:23150) with what
// modernc.org/libc's allocator holds outside the Go heap: live allocations, and bytes and
// regions mapped (the counters need the memory.counters tag). That is SQLite's memory: its page
// caches, statements and connections. (sqlite3_memory_used reads 0: modernc.org/sqlite builds
// SQLite without memory statistics.)

import (
	"fmt"
	"net/http"
	"os"

	"modernc.org/libc"
)

func init() {
	addr := os.Getenv("VIGIL_MEMDIAG_ADDR")
	if addr == "" {
		addr = "127.0.0.1:23150"
	}
	go func() {
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
			ms := libc.MemStat()
			fmt.Fprintf(w, "libc allocations %d, mapped %d bytes in %d regions\n", ms.Allocs, ms.Bytes, ms.Mmaps)
		})
		_ = http.ListenAndServe(addr, mux)
	}()
}
