package frontend

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/tap"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/overload"
)

// Early refusal: while history is behind, refuse heartbeats in the transport, before gRPC
// reads their bodies.
//
// A call refused by history's admission has already cost most of what a served one costs
// besides its write: gRPC read and decoded it, the interceptors authenticated, limited and
// validated it, it was routed to its shard, and it held a goroutine while it waited. Refused
// in grpc's tap, which runs as the stream's headers arrive, before any goroutine, buffer or
// message exists for it, a call costs a small fraction of that. The rule is the overload
// controller's (overload.Pressure.RefuseEarly); the tap supplies what only the transport
// knows: the heartbeat's deadline, and how many heartbeats it let through are not answered
// yet.
//
// Only heartbeats are refused: a shutdown, a poll or a completion always reaches history.

// earlyRefusalTick is how often the refusals are handed to the controller.
const earlyRefusalTick = 100 * time.Millisecond

// earlyRefusedMethods are the calls the tap may refuse: heartbeats, which a worker repeats
// anyway, and which are nearly all that a large fleet sends.
var earlyRefusedMethods = map[string]bool{
	workflowservice.WorkflowService_RecordWorkerHeartbeat_FullMethodName: true,
	livenesspb.WorkerLivenessService_RecordHeartbeat_FullMethodName:      true,
}

// errEarlyRefused is what a refused heartbeat gets: ResourceExhausted, which the SDKs retry
// with backoff, made once.
var errEarlyRefused = serviceerror.ToStatus(serviceerror.NewResourceExhausted(
	enumspb.RESOURCE_EXHAUSTED_CAUSE_SYSTEM_OVERLOADED,
	"vigil is behind: heartbeat refused before it was read; retry later")).Err()

// EarlyRefusal is the transport's early refusal of heartbeats. Tap is its grpc.InTapHandle and
// the EarlyRefusal itself a stats.Handler that counts the heartbeats let through until they
// are answered; Run hands its refusals to the controller.
type EarlyRefusal struct {
	pressure overload.Pressure
	ts       clock.TimeSource
	scope    tally.Scope

	// outstanding counts the heartbeats the tap let through whose RPC has begun and not
	// ended. It moves only on grpc's paired Begin and End events, so it cannot drift.
	outstanding atomic.Int64
	// transit counts the heartbeats let through whose RPC has not begun yet: on one busy core a
	// connection's reader can pass a thousand streams before any of their goroutines runs.
	transit transitCount
	// refused counts the heartbeats refused since the last report.
	refused atomic.Int64
}

var _ stats.Handler = (*EarlyRefusal)(nil)

// NewEarlyRefusal returns an early refusal that asks pressure, the overload controller of this
// host.
func NewEarlyRefusal(pressure overload.Pressure, ts clock.TimeSource, scope tally.Scope) *EarlyRefusal {
	if scope == nil {
		scope = tally.NoopScope
	}
	return &EarlyRefusal{pressure: pressure, ts: ts, scope: scope}
}

// passedTap marks the context of a heartbeat the tap let through, for HandleRPC to count.
type passedTap struct{}

// Tap is the grpc.InTapHandle: it runs on the connection's reader goroutine as a call's
// headers arrive, so it only compares and counts.
func (e *EarlyRefusal) Tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if !earlyRefusedMethods[info.FullMethodName] {
		return ctx, nil
	}
	var left time.Duration
	if deadline, ok := clock.DeadlineOf(ctx, e.ts); ok {
		left = max(deadline.Sub(e.ts.Now()), time.Nanosecond)
	}
	if e.pressure.RefuseEarly(e.Outstanding(), left) {
		e.refused.Add(1)
		return ctx, errEarlyRefused
	}
	e.transit.passed()
	return context.WithValue(ctx, passedTap{}, true), nil
}

// TagRPC, HandleRPC, TagConn and HandleConn make the EarlyRefusal a stats.Handler: the RPCs of
// the heartbeats the tap let through are counted from their Begin to their End, which grpc
// reports in pairs however a call ends.
func (e *EarlyRefusal) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (e *EarlyRefusal) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.Begin:
		if ctx.Value(passedTap{}) != nil {
			e.transit.begun()
			e.outstanding.Add(1)
		}
	case *stats.End:
		if ctx.Value(passedTap{}) != nil {
			e.outstanding.Add(-1)
		}
	}
}

func (e *EarlyRefusal) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (e *EarlyRefusal) HandleConn(context.Context, stats.ConnStats) {}

// Outstanding is how many heartbeats the tap let through are not answered yet: those whose
// RPC has begun, and those still waiting for it to begin.
func (e *EarlyRefusal) Outstanding() int { return int(e.outstanding.Load()) + e.transit.count() }

// transitCount counts the streams the tap let through whose RPC has not begun, over the last
// one to two transitWindows. A stream grpc aborts between the tap and its RPC (its deadline ran
// out in between) never begins; counted for ever, each would inflate the estimate until a
// restart. Counted in rotating windows, it is forgotten within two; a stream that took longer
// than a window to begin is forgotten too, which only makes the estimate a little low.
type transitCount struct {
	cur     atomic.Int32
	windows [2]struct{ passed, begun atomic.Int64 }
}

// transitWindow is how often the transit count drops its older window.
const transitWindow = time.Second

func (t *transitCount) passed() { t.windows[t.cur.Load()].passed.Add(1) }
func (t *transitCount) begun()  { t.windows[t.cur.Load()].begun.Add(1) }

// count is the streams passed and not begun over both windows; never negative (a stream passed
// before the older window may begin in it).
func (t *transitCount) count() int {
	n := int(t.windows[0].passed.Load() + t.windows[1].passed.Load() - t.windows[0].begun.Load() - t.windows[1].begun.Load())
	return max(0, n)
}

// rotate empties the older window and makes it the current one.
func (t *transitCount) rotate() {
	next := 1 - t.cur.Load()
	t.windows[next].passed.Store(0)
	t.windows[next].begun.Store(0)
	t.cur.Store(next)
}

// Run hands the refusals to the controller every earlyRefusalTick, and rotates the transit
// count every transitWindow, until ctx ends.
func (e *EarlyRefusal) Run(ctx context.Context) {
	rotated := e.ts.Now()
	for {
		fired, timer := e.ts.NewTimer(earlyRefusalTick)
		select {
		case <-ctx.Done():
			timer.Stop()
			e.report()
			return
		case <-fired:
			e.report()
			if now := e.ts.Now(); now.Sub(rotated) >= transitWindow {
				e.transit.rotate()
				rotated = now
			}
		}
	}
}

// report hands the refusals since the last report to the controller, and publishes the
// heartbeats outstanding.
func (e *EarlyRefusal) report() {
	metrics.HeartbeatsOutstanding.With(e.scope).Update(float64(e.Outstanding()))
	if refused := e.refused.Swap(0); refused > 0 {
		e.pressure.RefusedEarly(int(refused))
	}
}
