package frontend

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc/tap"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/common/admission"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// Early refusal: while history's queue is long, refuse heartbeats in the transport, before
// gRPC reads their bodies.
//
// Past its capacity, history's admission control refuses what it cannot serve in time, and
// that keeps the host from collapsing. But a call refused there has already cost most of what
// a served one costs besides its write: gRPC read and decoded it, the interceptors
// authenticated, limited and validated it, it was routed to its shard, and it held a goroutine
// (and its stack) while it waited. At twice capacity the refusals alone take a fifth of a core.
// Refused here, in grpc's tap (which runs as the stream's headers arrive, before any goroutine,
// buffer or message exists for it), a call costs a few microseconds.
//
// The rule is admission's own, made earlier: a heartbeat is refused while the writes already
// queued in history would keep it waiting longer than frontend.earlyRefusalTargetWait
// (admission.Pressure.EstimatedWait: the queue, spread over the slots, times the measured
// service time). There is no controller to tune and nothing to spiral: the refusals stop the
// moment the queue is short again, and what passes meets a short queue. Which heartbeats to
// refuse cannot be chosen here (the body is unread), so it is whichever arrive while the queue
// is long. Heartbeats refused here count for the expiry brake like those admission refuses
// (Pressure.RefusedEarly), so no lease runs out because of a refusal.
//
// Only heartbeats are refused: a shutdown, a poll or a completion always reaches history.

// earlyRefusalTick is how often refusals are reported to history and the setting is read.
const earlyRefusalTick = 100 * time.Millisecond

// earlyRefusedMethods are the calls the tap may refuse: heartbeats, which a worker repeats
// anyway, and which are nearly all that a large fleet sends.
var earlyRefusedMethods = map[string]bool{
	workflowservice.WorkflowService_RecordWorkerHeartbeat_FullMethodName: true,
	livenesspb.WorkerLivenessService_RecordHeartbeat_FullMethodName:      true,
}

// errEarlyRefused is what a refused heartbeat gets: ResourceExhausted, which the SDK retries
// with backoff, made once.
var errEarlyRefused = serviceerror.ToStatus(serviceerror.NewResourceExhausted(
	enumspb.RESOURCE_EXHAUSTED_CAUSE_SYSTEM_OVERLOADED,
	"vigil is behind: heartbeat refused before it was read; retry later")).Err()

// EarlyRefusal is the transport's early refusal of heartbeats (see above). Tap is its
// grpc.InTapHandle; Run reports its refusals to history and follows the setting.
type EarlyRefusal struct {
	targetWait func() time.Duration
	pressure   admission.Pressure
	ts         clock.TimeSource
	scope      tally.Scope

	// target is frontend.earlyRefusalTargetWait in nanoseconds, as Run last read it; 0: off.
	target atomic.Int64
	// Since the last report: heartbeats refused, and the deadline they had left.
	refused   atomic.Int64
	lostNanos atomic.Int64
}

// NewEarlyRefusal returns an early refusal that asks pressure, history's admission on this host.
func NewEarlyRefusal(dc *dynamicconfig.Collection, pressure admission.Pressure, ts clock.TimeSource, scope tally.Scope) *EarlyRefusal {
	if scope == nil {
		scope = tally.NoopScope
	}
	e := &EarlyRefusal{targetWait: dynamicconfig.EarlyRefusalTargetWait.Get(dc), pressure: pressure, ts: ts, scope: scope}
	e.target.Store(int64(e.targetWait()))
	return e
}

// Tap is the grpc.InTapHandle: it runs on the connection's reader goroutine as a call's headers
// arrive, so it only compares and counts.
func (e *EarlyRefusal) Tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	target := e.target.Load()
	if target <= 0 || int64(e.pressure.EstimatedWait()) <= target || !earlyRefusedMethods[info.FullMethodName] {
		return ctx, nil
	}
	e.refused.Add(1)
	if deadline, ok := ctx.Deadline(); ok {
		e.lostNanos.Add(int64(deadline.Sub(e.ts.Now())))
	}
	return ctx, errEarlyRefused
}

// Run reports refusals to history every earlyRefusalTick, and reads the setting, until ctx
// ends.
func (e *EarlyRefusal) Run(ctx context.Context) {
	for {
		fired, timer := e.ts.NewTimer(earlyRefusalTick)
		select {
		case <-ctx.Done():
			timer.Stop()
			e.report()
			return
		case <-fired:
			e.report()
		}
	}
}

// report hands the refusals since the last report to history (for the expiry brake) and
// the metric, and reads the setting.
func (e *EarlyRefusal) report() {
	e.target.Store(int64(e.targetWait()))
	refused := e.refused.Swap(0)
	lost := e.lostNanos.Swap(0)
	if refused == 0 {
		return
	}
	e.pressure.RefusedEarly(int(refused), time.Duration(lost/refused))
	metrics.EarlyRefusals.With(e.scope).Inc(refused)
}
