// Package admission names what a history host's admission control orders and how a library
// reaches it. The host implements it (history.Admission); the libraries that serve history
// calls (chasm/worker) classify their calls and ask it for a turn. It sits below both so that
// neither imports the other.
package admission

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
	// ClassRegistration is the first heartbeat of a key this host does not know. Paced by
	// history.registrationAdmitRPS, then served after heartbeats, on at most half of a shard's
	// slots; its create commits behind known workers' updates (persistence group commit lanes).
	ClassRegistration
	// ClassRead is a describe or list. Served last, and refused while heartbeats wait.
	ClassRead

	// NumClasses is the number of classes.
	NumClasses = 3
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

// RetryHorizon is the most of its deadline a refused heartbeat may have left to be counted as
// one its caller retries (Pressure.RetriedEarly), not as lost: the Go SDK's heartbeat deadline.
// Within it, every such heartbeat has been sent again and either served or lost (refused
// with too little left to retry, or dropped).
const RetryHorizon = 10 * time.Second

// LoadSignal tells how far behind the host is: how long heartbeats lately waited in it, and
// what share of them it refused.
type LoadSignal interface {
	HeartbeatQueueDelay() time.Duration
	// RefusedShare is the share of heartbeats the host refused or dropped over [from, to),
	// taken second by second: the odds that a heartbeat sent at a time unrelated to the
	// host's load was among them. known is false when the host cannot tell (its record does
	// not reach back to from, or it saw no heartbeat in the span).
	RefusedShare(from, to time.Time) (share float64, known bool)
	// RetriesPendingUntil is until when heartbeats the host refused may still be sent again by
	// callers that retry them (zero if none): their refusals are not counted as lost in
	// RefusedShare or HeartbeatQueueDelay, and until then a worker's last heartbeats may be
	// among them, still on their way.
	RetriesPendingUntil() time.Time
}

// Pressure is what a host's admission control tells the transport in front of it, so that the
// transport can refuse, before reading them, the heartbeats admission would keep waiting too
// long (frontend's early refusal): a refusal there costs a fraction of one made after the call
// was read, decoded, authorized and routed.
type Pressure interface {
	// EstimatedWait is how long a write arriving now would wait for a slot. Called for every
	// heartbeat, on the connection's reader goroutine: it must not block.
	EstimatedWait() time.Duration
	// WaitBehind is how long a write would wait for a slot behind n writes on their way to the
	// host (read, queued or being served), at the host's measured pace: what the transport
	// estimates from the calls it let through, which reach the queue only after they are read.
	// Called for every heartbeat, on the connection's reader goroutine: it must not block.
	WaitBehind(n int) time.Duration
	// RefusedEarly counts n heartbeats refused before they reached the host, each having lost
	// lost (what was left of its deadline): the expiry brake counts them with its own.
	RefusedEarly(n int, lost time.Duration)
	// RetriedEarly tells the host that it refused heartbeats before they reached it that their
	// callers will send again, the one with most time left having had left of its deadline:
	// they are not lost, but may be on their way until then (LoadSignal.RetriesPendingUntil).
	RetriedEarly(left time.Duration)
}

// WithPatience marks ctx as the call of a caller that retries a refusal until its deadline
// anyway (the Go SDK's heartbeat, by its client-name): for such a call, waiting for a slot
// until its deadline costs the host less than a refusal, since each refusal brings the call
// back after a backoff of 200 ms to 1 s, to be read, decoded and judged again. Refused at
// the first sign of a queue, each heartbeat of an SDK fleet past capacity was sent several
// times over. The transport in front of the host marks
// the calls it knows to be patient; admission lets them wait up to their deadline (at most
// RetryHorizon) even if history.admissionHeartbeatMaxQueueDelay is shorter.
func WithPatience(ctx context.Context) context.Context {
	return context.WithValue(ctx, patientKey{}, true)
}

// Patient says whether ctx is marked by WithPatience.
func Patient(ctx context.Context) bool {
	return ctx.Value(patientKey{}) != nil
}

type patientKey struct{}
