package matching

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkClientAddThenPoll measures one task's trip through the routing Client, added and
// then polled, with the queue on the calling host ("local": no socket) and on another host
// ("forwarded": both calls over gRPC on loopback). Reports ns per task (add + poll).
func BenchmarkClientAddThenPoll(b *testing.B) {
	for _, forwarded := range []bool{false, true} {
		name := "local"
		if forwarded {
			name = "forwarded"
		}
		b.Run(name, func(b *testing.B) {
			hosts := newTestCluster(b, 2, Options{})
			owner, caller := hosts[0], hosts[0]
			if forwarded {
				caller = hosts[1]
			}
			q := queueOwnedBy(b, "tq", owner, members(hosts...), nil, nil)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				if err := caller.client.AddActivityTask(ctx, queueTask(q, fmt.Sprintf("act-%d", i), 1)); err != nil {
					b.Fatal(err)
				}
				if _, ok, err := caller.client.PollActivityTask(ctx, pollOf(q, "w")); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
