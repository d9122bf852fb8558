package watch

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigilhq/vigil/chasm/worker"
)

// BenchmarkHubPublish is the cost a committed heartbeat pays for the live view: numbering,
// the ring, host bookkeeping and one offer per watcher of the namespace.
func BenchmarkHubPublish(b *testing.B) {
	for _, watchers := range []int{0, 1, 10} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			h := NewHub(Options{})
			for range watchers {
				s, _, _ := h.Subscribe(ns, 0, 0, 5*time.Second)
				defer s.Close()
			}
			states := make([]worker.Change, 1000)
			for i := range states {
				states[i] = change(worker.ChangeHeartbeat, fmt.Sprint("w-", i), state(active, fmt.Sprint("m-", i%50), time.Now()))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				h.Publish(states[i%len(states)])
			}
		})
	}
}
