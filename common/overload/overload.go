// Package overload is a history host's overload controller: which calls it serves first, how
// many at once, which it refuses, and whether it is behind. Everything that decides what an
// overloaded host does is here; the frontend's transport tap, history's router and the expiry
// brake only ask it.
//
// The controller follows the call and its deadline, never the client that sent it:
//
//   - a priority queue per shard: heartbeats of known workers, then registrations, then reads
//     (Class). A read is refused while any write waits;
//   - an adaptive concurrency limit per shard, by additive increase and multiplicative decrease
//     on the time admitted writes hold their slot (adaptiveLimit), so that work waits in the
//     queue, where it can be ordered and refused, not in the store;
//   - deadline-aware shedding: a call whose expected wait (the work queued ahead of it at the
//     shard's measured pace) would outlast its deadline, or its class's queue delay cap, is
//     refused at once with a retryable ResourceExhausted; one whose deadline passes while it
//     waits is dropped unserved. An overloaded host then spends its time only on calls whose
//     callers still wait for the answer;
//   - the early refusal rule (RefuseEarly) the frontend applies in its transport tap, before a
//     heartbeat is read, so that a refusal costs a fraction of a served call;
//   - the behind signal (Behind), which the expiry brake reads: heartbeats wait long, or a
//     share of them is refused or arrives late, on this host or on another host of the
//     cluster.
package overload

import (
	"context"
	"time"
)

// Class orders the work a host admits when it cannot serve everything at once.
type Class int

const (
	// ClassHeartbeat is a heartbeat of a worker this host knows, or any call that keeps a known
	// worker's state right (shutdown, binding changes). Served first: a heartbeat lost for a
	// whole lease costs a live worker its work.
	ClassHeartbeat Class = iota
	// ClassRegistration is the first heartbeat of a key this host does not know. Served after
	// heartbeats, on at most three quarters of a shard's slots, and bounded in its wait as
	// they are.
	ClassRegistration
	// ClassRead is a describe or list. Served last, and refused while writes wait.
	ClassRead

	numClasses = 3
)

func (c Class) String() string {
	switch c {
	case ClassHeartbeat:
		return "heartbeat"
	case ClassRegistration:
		return "registration"
	default:
		return "read"
	}
}

// ListGate is the gate of calls that span every shard (lists and counts).
const ListGate int32 = -1

// Admitter is the admission control in front of a library's history calls. Admit returns a
// release to call once the work is done, or the error to answer.
type Admitter interface {
	Admit(ctx context.Context, shardID int32, class Class, bytes int) (func(), error)
}

// Signal tells the expiry brake whether the host, or another host of its cluster, is behind:
// whether a lease that runs out now more likely lost its heartbeats to the server than to its
// worker. The brake tells it in turn which heartbeats came late.
type Signal interface {
	Behind() bool
	// RenewedLate counts a heartbeat that renewed its worker's lease with less than a third of
	// it left: a heartbeat held up for a whole interval on its way (in the network, the
	// transport's buffers or the client's retries), where history's own waits do not see it.
	RenewedLate()
}

// Pressure is what the frontend's transport tap asks before it lets a heartbeat through, and
// tells afterwards. Its methods are called for every heartbeat, on the connection's reader
// goroutine: they must not block.
type Pressure interface {
	// RefuseEarly says whether a heartbeat arriving now is refused before it is read, with
	// outstanding heartbeats already let through and not answered, and left of its deadline
	// (0: none).
	RefuseEarly(outstanding int, left time.Duration) bool
	// RefusedEarly counts n heartbeats refused so, for the behind signal.
	RefusedEarly(n int)
}

// Config is what the controller reads at use time; every field must be set. history fills it
// from dynamic config.
type Config struct {
	// MaxInFlightPerShard and MinInFlightPerShard bound the adaptive limit of calls served at
	// once per shard.
	MaxInFlightPerShard func() int
	MinInFlightPerShard func() int
	// TargetLatency is the slot time of a write above which the limit shrinks; <= 0: the limit
	// is MaxInFlightPerShard.
	TargetLatency func() time.Duration
	// HeartbeatMaxQueueDelay bounds the expected wait of a heartbeat (a registration
	// included), and MaxQueueDelay that of a read; <= 0: only the caller's deadline.
	MaxQueueDelay          func() time.Duration
	HeartbeatMaxQueueDelay func() time.Duration
	// MaxQueued and MaxQueuedBytes bound the calls waiting, and their payload, host-wide.
	MaxQueued      func() int
	MaxQueuedBytes func() int
	// EarlyRefusalTargetWait is the wait past which the transport refuses a share of
	// heartbeats before reading them; <= 0: no early refusal.
	EarlyRefusalTargetWait func() time.Duration
	// BehindDelay is the time heartbeats spend in history past which the host is behind, and
	// BehindRefusedShare the share of the last seconds' heartbeats refused or late
	// (Signal.RenewedLate) past which it is; <= 0 turns either trigger off.
	BehindDelay        func() time.Duration
	BehindRefusedShare func() float64
}
