package chaos

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The lease model that the histories of a partition run are checked against (porcupine).
//
// Operations, per simulated worker, as the client saw them (invocation and return on the
// suite's clock, which is the hosts' clock too: every process runs on this machine):
//
//   - heartbeat: a RecordWorkerHeartbeat the server acknowledged. The server applied it at
//     some instant s within [invoked, returned], recording s as the worker's last heartbeat
//     time, and granted a lease of at least minLease from s. A heartbeat that failed has an
//     unknown outcome; leaving it out of the history only removes constraints (the model then
//     holds a lease the server may have extended further), so the check stays sound.
//   - read: one listing of the workers (ListWorkerLiveness) showing the worker ACTIVE or
//     INACTIVE and the server time of its last heartbeat.
//
// State: until, the earliest the lease may run out given the heartbeats linearized so far
// (max over them of invoked + minLease), and since, the latest invocation among them.
//
// Step:
//   - heartbeat: until = max(until, invoked + minLease); since = max(since, invoked). Always
//     legal.
//   - read at a linearization point r within [invoked, returned]:
//   - INACTIVE is legal only if r may be past the lease: returned ≥ until. A read showing a
//     worker INACTIVE while an acknowledged heartbeat's lease had not run out is illegal;
//   - the last heartbeat time shown must be at least since − lag − clockTolerance, where lag
//     is worker.heartbeatWriteInterval: the owner answers a heartbeat that only renews the
//     lease from memory and writes one at least that often, so a listing served from the
//     store (another host's, or after a crash or a handoff) may show the last written
//     heartbeat; an acknowledged heartbeat is never lost beyond that, nor overwritten by an
//     older one;
//   - ACTIVE is otherwise always legal: a lease may be found expired after its end.
//
// The history is linearizable if there is an order of the operations, consistent with real
// time (an operation that returned before another was invoked comes first), in which every
// step is legal. Porcupine searches each worker's history on its own (Partition).
type leaseModelOp struct {
	heartbeat bool
	// invoked and returned are the client's unix nanos; lastHeartbeat (reads) the server's.
	invoked, returned int64
	inactive          bool
	lastHeartbeat     int64
}

type leaseModelState struct{ until, since int64 }

// clockTolerance absorbs the difference between two readings of the machine's clock by two
// processes (the suite's and a host's) around the same instant.
const clockTolerance = 50 * time.Millisecond

func leaseModel(minLease, lag time.Duration) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[int][]porcupine.Operation{}
			for _, op := range history {
				byKey[op.ClientId] = append(byKey[op.ClientId], op)
			}
			keys := make([]int, 0, len(byKey))
			for k := range byKey {
				keys = append(keys, k)
			}
			sort.Ints(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, byKey[k])
			}
			return out
		},
		Init: func() any { return leaseModelState{} },
		Step: func(state, input, _ any) (bool, any) {
			s, op := state.(leaseModelState), input.(leaseModelOp)
			if op.heartbeat {
				return true, leaseModelState{until: max(s.until, op.invoked+int64(minLease)), since: max(s.since, op.invoked)}
			}
			if op.inactive && op.returned < s.until {
				return false, s
			}
			if op.lastHeartbeat < s.since-int64(lag+clockTolerance) {
				return false, s
			}
			return true, s
		},
		DescribeOperation: func(input, _ any) string {
			op := input.(leaseModelOp)
			if op.heartbeat {
				return "heartbeat"
			}
			state := "ACTIVE"
			if op.inactive {
				state = "INACTIVE"
			}
			return fmt.Sprintf("read %s, last heartbeat %s", state, time.Unix(0, op.lastHeartbeat).UTC().Format("15:04:05.000"))
		},
	}
}

// leaseHistory records, per simulated worker, the client-side history the lease model is
// checked against.
type leaseHistory struct {
	mu   sync.Mutex
	ids  map[string]int
	keys []string
	ops  []porcupine.Operation
}

func (h *leaseHistory) id(key string) int {
	id, ok := h.ids[key]
	if !ok {
		if h.ids == nil {
			h.ids = map[string]int{}
		}
		id = len(h.keys)
		h.ids[key] = id
		h.keys = append(h.keys, key)
	}
	return id
}

// heartbeat records an acknowledged heartbeat of the workers keys, invoked at sent and
// answered took later.
func (h *leaseHistory) heartbeat(keys []string, sent time.Time, took time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		inv, ret := sent.UnixNano(), sent.Add(took).UnixNano()
		h.ops = append(h.ops, porcupine.Operation{ClientId: h.id(k), Call: inv, Return: ret,
			Input: leaseModelOp{heartbeat: true, invoked: inv, returned: ret}})
	}
}

// read records one listing's view of worker key, the listing invoked at invoked and answered
// at returned.
func (h *leaseHistory) read(key string, invoked, returned time.Time, inactive bool, lastHeartbeat time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	inv, ret := invoked.UnixNano(), returned.UnixNano()
	h.ops = append(h.ops, porcupine.Operation{ClientId: h.id(key), Call: inv, Return: ret,
		Input: leaseModelOp{invoked: inv, returned: ret, inactive: inactive, lastHeartbeat: lastHeartbeat.UnixNano()}})
}

// lastAcknowledged returns, per worker, the invocation of its last acknowledged heartbeat.
func (h *leaseHistory) lastAcknowledged() map[string]time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]time.Time, len(h.keys))
	for _, op := range h.ops {
		if in := op.Input.(leaseModelOp); in.heartbeat {
			key := h.keys[op.ClientId]
			if at := time.Unix(0, in.invoked); at.After(out[key]) {
				out[key] = at
			}
		}
	}
	return out
}

// check runs porcupine over the history: ok, or the workers whose history is not
// linearizable (or could not be decided within timeout).
func (h *leaseHistory) check(minLease, lag, timeout time.Duration) (ops int, bad []string) {
	h.mu.Lock()
	ops = len(h.ops)
	history := append([]porcupine.Operation(nil), h.ops...)
	keys := append([]string(nil), h.keys...)
	h.mu.Unlock()
	model := leaseModel(minLease, lag)
	for _, part := range model.Partition(history) {
		switch porcupine.CheckOperationsTimeout(model, part, timeout) {
		case porcupine.Ok:
		case porcupine.Illegal:
			bad = append(bad, fmt.Sprintf("worker %s: its history is not linearizable against the lease model%s",
				keys[part[0].ClientId], explain(part, minLease, lag)))
		default:
			bad = append(bad, fmt.Sprintf("worker %s: porcupine could not decide within %v", keys[part[0].ClientId], timeout))
		}
	}
	return ops, bad
}

// explain names a read of part that breaks the model against the heartbeats that returned
// before it was invoked (those every linearization puts first), if one does.
func explain(part []porcupine.Operation, minLease, lag time.Duration) string {
	for _, r := range part {
		read := r.Input.(leaseModelOp)
		if read.heartbeat {
			continue
		}
		var until, since int64
		for _, o := range part {
			if op := o.Input.(leaseModelOp); op.heartbeat && o.Return < r.Call {
				until, since = max(until, op.invoked+int64(minLease)), max(since, op.invoked)
			}
		}
		at := time.Unix(0, read.invoked).UTC().Format("15:04:05.000")
		switch {
		case read.inactive && read.returned < until:
			return fmt.Sprintf(": listed INACTIVE at %s, %v before the lease of a heartbeat acknowledged earlier could run out",
				at, time.Duration(until-read.returned).Round(time.Millisecond))
		case read.lastHeartbeat < since-int64(lag+clockTolerance):
			return fmt.Sprintf(": listed at %s with a last heartbeat %v older than one acknowledged before the listing (%v allowed)",
				at, time.Duration(since-read.lastHeartbeat).Round(time.Millisecond), lag)
		}
	}
	return ""
}
