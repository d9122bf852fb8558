package watch

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/internal/heaptest"
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
				// As a commit publishes it: with the bytes it wrote, which the ring keeps.
				encoded, err := proto.Marshal(states[i].State)
				require.NoError(b, err)
				states[i].Encoded = func() []byte { return encoded }
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				h.Publish(states[i%len(states)])
			}
		})
	}
}

// BenchmarkRelay is what a frontend pays per event of another history host: decoding it from
// a WatchChanges response and relaying it into its own hub (the stale-event check, host
// bookkeeping, one offer per watcher).
func BenchmarkRelay(b *testing.B) {
	h := NewHub(Options{})
	s, _, _ := h.Subscribe(ns, 0, 0, 5*time.Second)
	defer s.Close()
	const n = 1000
	wire := make([][]byte, n)
	for i := range wire {
		st := state(active, fmt.Sprint("m-", i%50), time.Now())
		st.HeartbeatCount = 1
		data, err := proto.Marshal(&workerpb.WatchChangesResponse{Changes: []*workerpb.WatchChange{EventToProto(Event{
			Seq: uint64(i + 1), Time: time.Now(), Kind: KindHeartbeat, NamespaceID: ns, WorkerInstanceKey: fmt.Sprint("w-", i), State: st})}})
		if err != nil {
			b.Fatal(err)
		}
		wire[i] = data
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var resp workerpb.WatchChangesResponse
		if err := proto.Unmarshal(wire[i%n], &resp); err != nil {
			b.Fatal(err)
		}
		resp.Changes[0].State.HeartbeatCount = int64(i) // each one newer than the last
		h.Relay(EventFromProto(resp.Changes[0]))
		if i%4096 == 0 {
			drainBench(s)
		}
	}
}

func drainBench(s *Subscription) {
	s.hub.mu.Lock()
	s.buf, s.last = nil, nil
	s.hub.mu.Unlock()
}

// BenchmarkHubMemoryPerWorker is the heap a hub holds for each ACTIVE worker of a large fleet
// (100,000 workers on 1,000 hosts), once it has gone idle (no watcher for RingRetention: it
// keeps no events, only the host bookkeeping). The keys and states belong to the caller, as
// the engine's cache shares them in process.
func BenchmarkHubMemoryPerWorker(b *testing.B) {
	const workers, hosts = 100_000, 1_000
	changes := make([]worker.Change, workers)
	states := make([]*workerpb.WorkerState, hosts)
	for i := range states {
		states[i] = state(active, fmt.Sprint("host-", i), time.Unix(0, 0))
	}
	for i := range changes {
		changes[i] = change(worker.ChangeRegistered, fmt.Sprintf("worker-%07d", i), states[i%hosts])
	}
	for b.Loop() {
		ts := clock.NewFakeTimeSource()
		h := NewHub(Options{TimeSource: ts})
		ts.Advance(2 * time.Minute) // past the default RingRetention
		h.Publish(changes[0])       // the hub finds itself unwatched and goes idle
		before := heaptest.Live()
		for _, c := range changes[1:] {
			h.Publish(c)
		}
		b.ReportMetric(float64(heaptest.Live()-before)/(workers-1), "B/worker")
		runtime.KeepAlive(h)
	}
}

// BenchmarkRelayMemoryPerWorker is the heap a frontend's hub holds for each ACTIVE worker of a
// cluster's fleet (100,000 workers on 1,000 hosts) once it has gone idle: the mark of how far
// each worker's relayed states went, and the host bookkeeping. Each event is decoded from the
// wire with strings of its own, as a frontend receives it, so what the hub keeps of them
// counts here.
func BenchmarkRelayMemoryPerWorker(b *testing.B) {
	const workers, hosts = 100_000, 1_000
	wire := make([][]byte, workers)
	for i := range wire {
		st := counted(active, fmt.Sprint("host-", i%hosts), 1, 0)
		data, err := proto.Marshal(EventToProto(Event{Seq: uint64(i + 1), Time: time.Unix(0, 0), Kind: KindRegistered,
			NamespaceID: "0b9e3bd4-8a44-4e4e-9f5c-3c2f4a6b7d10", WorkerInstanceKey: fmt.Sprintf("worker-%07d", i), State: st}))
		require.NoError(b, err)
		wire[i] = data
	}
	decode := func(data []byte) Event {
		var c workerpb.WatchChange
		require.NoError(b, proto.Unmarshal(data, &c))
		return EventFromProto(&c)
	}
	for b.Loop() {
		ts := clock.NewFakeTimeSource()
		h := NewHub(Options{TimeSource: ts})
		ts.Advance(2 * time.Minute) // past the default RingRetention
		h.Relay(decode(wire[0]))    // the hub finds itself unwatched and goes idle
		before := heaptest.Live()
		for _, data := range wire[1:] {
			h.Relay(decode(data))
		}
		b.ReportMetric(float64(heaptest.Live()-before)/(workers-1), "B/worker")
		runtime.KeepAlive(h)
	}
}
