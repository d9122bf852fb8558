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
// (and its stack) while it waited. Far past capacity those refusals alone take a large share
// of the core. Refused here, in grpc's tap (which runs as the stream's headers arrive, before
// any goroutine, buffer or message exists for it), a call costs a small fraction of what a
// served one does. Part of that cost is grpc-go's: it does not cancel a refused stream's
// context, so the timer of its deadline and a few hundred bytes live on until that deadline.
//
// The rule is admission's own, made earlier, and proportional. The wait a heartbeat arriving
// now would meet is the larger of two estimates:
//
//   - the writes already queued in history (admission.Pressure.EstimatedWait);
//   - the heartbeats this frontend has let through and not yet answered, wherever they are:
//     still being read, decoded and authorized, queued in history, or in a slot
//     (admission.Pressure.WaitBehind). Under load a call spends a long time between the tap
//     and admission, and a burst let through while the queue looked short overshot it by
//     seconds of work; counted from the moment the tap lets it through, it is seen at once.
//     In a cluster the heartbeats this frontend forwarded to other hosts count too, at this
//     host's pace: a slow peer makes this frontend refuse sooner, which is the back-pressure
//     its callers should meet anyway.
//
// Up to frontend.earlyRefusalTargetWait nothing is refused; beyond it a share of heartbeats
// that grows with the excess, all of them at twice the target. Refusing all or nothing at one
// line let a burst pass whole, then refused everything while it drained, and the clients
// refused together came back together; a share lets what passes rise and fall with the
// excess, and carries more past capacity. The share is spread evenly over
// the heartbeats as they arrive (an error-diffusion counter, not a random draw), so it is
// exact over any run of calls. Which heartbeats to refuse cannot be chosen here (the body is
// unread). Heartbeats refused here count for the expiry brake like those admission refuses
// (Pressure.RefusedEarly), so no lease runs out because of a refusal; except those their
// callers send again (retried, below), which are delayed, not lost (Pressure.RetriedEarly).
//
// A heartbeat whose wait would run past its own deadline is refused whatever the share, below
// the target too: history's admission would refuse it anyway, after reading it. Those are
// mostly the SDK's retries of refused heartbeats, which come back with less of their deadline
// left each time.
//
// A heartbeat whose caller retries a refusal anyway (the Go SDK's, retriesRefusals) is patient:
// its target is half of what is left of its deadline, if that is more, and history lets it
// wait until its deadline. Refused early, it comes back after 200 ms to 1 s to be read again;
// waiting, it costs a goroutine and its message until its turn, and its caller sends nothing
// more meanwhile.
//
// With frontend.earlyRefusalMaxOutstanding set, every heartbeat is refused while that many are
// let through and unanswered, however short the wait looks: each holds a goroutine, its stack
// and its message, so the bound keeps latency and memory down at overload. But a count does
// not follow the host's pace: a host serving a large fleet reaches any fixed count after a
// hiccup of a fraction of a second, and every refusal the bound then makes counts for the
// expiry brake, which then holds real deaths long past their leases. So the bound is off by
// default; the share rule, which follows the measured wait, is what ships.
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
// grpc.InTapHandle and the EarlyRefusal itself a stats.Handler that counts the heartbeats let
// through until they are answered; Run reports its refusals to history and follows the
// setting.
type EarlyRefusal struct {
	targetWait     func() time.Duration
	maxOutstanding func() int
	pressure       admission.Pressure
	ts             clock.TimeSource
	scope          tally.Scope

	// target is frontend.earlyRefusalTargetWait in nanoseconds, as Run last read it; 0: off.
	target atomic.Int64
	// limit is frontend.earlyRefusalMaxOutstanding, as Run last read it; 0: no bound.
	limit atomic.Int64
	// outstanding counts the heartbeats the tap let through whose RPC has begun and not
	// ended. It moves only on grpc's paired Begin and End events, so it cannot drift.
	outstanding atomic.Int64
	// transit counts the heartbeats let through whose RPC has not begun yet: on one busy core a
	// connection's reader can pass a thousand streams before any of their goroutines runs.
	transit transitCount
	// draws accumulates the refused share of every heartbeat the tap judged, in 1/shareOne:
	// a heartbeat is refused when it carries the sum past a multiple of shareOne.
	draws atomic.Uint64
	// Since the last report: heartbeats refused, and the deadline they had left; and of the
	// heartbeats refused that their callers retry (retried), how many and the longest deadline
	// one had left.
	refused     atomic.Int64
	lostNanos   atomic.Int64
	retried     atomic.Int64
	retriedLeft atomic.Int64
}

// shareOne is a refused share of 1 (every heartbeat) in the units of EarlyRefusal.draws.
const shareOne = 1 << 10

var _ stats.Handler = (*EarlyRefusal)(nil)

// NewEarlyRefusal returns an early refusal that asks pressure, history's admission on this host.
func NewEarlyRefusal(dc *dynamicconfig.Collection, pressure admission.Pressure, ts clock.TimeSource, scope tally.Scope) *EarlyRefusal {
	if scope == nil {
		scope = tally.NoopScope
	}
	e := &EarlyRefusal{targetWait: dynamicconfig.EarlyRefusalTargetWait.Get(dc),
		maxOutstanding: dynamicconfig.EarlyRefusalMaxOutstanding.Get(dc), pressure: pressure, ts: ts, scope: scope}
	e.readSettings()
	return e
}

// passedTap marks the context of a heartbeat the tap let through, for HandleRPC to count.
type passedTap struct{}

// Tap is the grpc.InTapHandle: it runs on the connection's reader goroutine as a call's headers
// arrive, so it only compares and counts.
func (e *EarlyRefusal) Tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if !earlyRefusedMethods[info.FullMethodName] {
		return ctx, nil
	}
	patient := retriesRefusals(info)
	if patient {
		ctx = admission.WithPatience(ctx)
	}
	target, limit := e.target.Load(), e.limit.Load()
	if target <= 0 && limit <= 0 {
		return ctx, nil
	}
	refused, wait := e.refuse(ctx, time.Duration(target), limit, patient)
	if !refused {
		e.transit.passed()
		return context.WithValue(ctx, passedTap{}, true), nil
	}
	if deadline, ok := clock.DeadlineOf(ctx, e.ts); ok {
		left := deadline.Sub(e.ts.Now())
		if patient && left >= retryRoom && left <= admission.RetryHorizon {
			e.retried.Add(1)
			storeMax(&e.retriedLeft, int64(left))
			return ctx, errEarlyRefused
		}
		// What it lost, as history counts its own refusals: what was left of its deadline,
		// and at least the wait that refused it.
		e.lostNanos.Add(int64(max(wait, left)))
	}
	e.refused.Add(1)
	return ctx, errEarlyRefused
}

// storeMax raises a to v if v is larger.
func storeMax(a *atomic.Int64, v int64) {
	for cur := a.Load(); v > cur && !a.CompareAndSwap(cur, v); cur = a.Load() {
	}
}

// refuse says whether a heartbeat arriving now is refused, and the wait it was judged at:
// limit heartbeats are outstanding already, or the wait it would meet runs past its deadline,
// or it is among the share refused at that wait. A patient heartbeat (one whose caller retries
// refusals, retriesRefusals) is judged against half of what is left of its deadline (at most
// admission.RetryHorizon) if that is more than the target: refused, it would come back.
//
// The deadline matters for the SDK's retries: a heartbeat refused here comes back after 200 ms,
// 400 ms and so on up to 1 s, until its 10 s run out, each time with less of its deadline left.
// Let through on a share, a late attempt was read, decoded and routed, only for history's
// admission to find its wait past its deadline and refuse it there, at several times the cost.
func (e *EarlyRefusal) refuse(ctx context.Context, target time.Duration, limit int64, patient bool) (bool, time.Duration) {
	outstanding := e.Outstanding()
	if limit > 0 && int64(outstanding) >= limit {
		return true, 0
	}
	if target <= 0 {
		return false, 0
	}
	wait := max(e.pressure.EstimatedWait(), e.pressure.WaitBehind(outstanding))
	if wait <= 0 {
		return false, 0
	}
	if deadline, ok := clock.DeadlineOf(ctx, e.ts); ok {
		left := deadline.Sub(e.ts.Now())
		if wait >= left {
			return true, wait
		}
		if patient {
			target = max(target, min(left, admission.RetryHorizon)/2)
		}
	}
	share := refusedShare(wait, target)
	return share > 0 && e.draw(share), wait
}

// refusedShare is the share of heartbeats to refuse, in 1/shareOne, when a new one would wait
// wait against the target: none up to the target, then growing with the excess, all from
// twice the target on.
func refusedShare(wait, target time.Duration) uint64 {
	if wait <= target {
		return 0
	}
	if wait >= 2*target {
		return shareOne
	}
	return uint64((wait - target) * shareOne / target)
}

// draw adds share to the running sum and says whether this heartbeat is one to refuse: whether
// the sum crossed a multiple of shareOne. Over any run of heartbeats judged at one share, the
// refused are that share of them, within one.
func (e *EarlyRefusal) draw(share uint64) bool {
	sum := e.draws.Add(share)
	return sum/shareOne != (sum-share)/shareOne
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

// Run reports refusals to history every earlyRefusalTick, reads the setting, and rotates the
// transit count every transitWindow, until ctx ends.
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

// readSettings reads the settings the tap follows.
func (e *EarlyRefusal) readSettings() {
	e.target.Store(int64(e.targetWait()))
	e.limit.Store(int64(e.maxOutstanding()))
}

// report hands the refusals since the last report to history (for the expiry brake) and
// the metric, and reads the setting.
func (e *EarlyRefusal) report() {
	e.readSettings()
	metrics.HeartbeatsOutstanding.With(e.scope).Update(float64(e.Outstanding()))
	if retried := e.retried.Swap(0); retried > 0 {
		e.pressure.RetriedEarly(time.Duration(e.retriedLeft.Swap(0)))
		metrics.EarlyRefusals.With(e.scope).Inc(retried)
		metrics.EarlyRefusalsRetried.With(e.scope).Inc(retried)
	}
	refused := e.refused.Swap(0)
	lost := e.lostNanos.Swap(0)
	if refused == 0 {
		return
	}
	e.pressure.RefusedEarly(int(refused), time.Duration(lost/refused))
	metrics.EarlyRefusals.With(e.scope).Inc(refused)
}

// retryingClients are the clients that retry a heartbeat refused with ResourceExhausted until
// its deadline, by the client-name header they send. The Go SDK sends RecordWorkerHeartbeat
// with a 10 s deadline and retries ResourceExhausted after 200 ms, doubling to at most 1 s,
// with 20 % jitter, while the deadline allows (the SDK's retry policy for this call, verified
// against v1.50.0). Add another SDK only once its retry of this call is verified: a refusal of a
// client that does not retry is a lost heartbeat, and must count as one.
var retryingClients = map[string]bool{"temporal-go": true}

// retryRoom is the least of its deadline a refused heartbeat of a retrying client must have
// left to be retried for sure: the Go SDK's longest wait between attempts, 1 s plus 20 %
// jitter, with margin. The most it may have left is admission.RetryHorizon, the SDK's
// heartbeat deadline. A refusal outside these bounds counts as a lost heartbeat.
const retryRoom = 2 * time.Second

// retriesRefusals says whether the caller of a heartbeat sends it again when it is refused
// with ResourceExhausted, while its deadline allows: a Temporal SDK heartbeat
// (WorkflowService.RecordWorkerHeartbeat) of a client that retries refusals, or a liveness API
// heartbeat (WorkerLivenessService.RecordHeartbeat) whose caller says it does, with the
// RetriesRefusalsHeader set to "true". Such a heartbeat
// is patient (admission.WithPatience): the tap and history's admission let it wait for its
// turn up to its deadline rather than refuse it at the first sign of a queue, since each
// refusal only brings it back to be read, decoded and judged again. Refused as early as a
// heartbeat whose caller gives up, each heartbeat of an SDK fleet twice past capacity was sent
// several times. Held, it is read once, and the host answers more and refuses fewer. A
// heartbeat held that long delays its worker's next one, which the expiry brake's weighing
// must allow for (heldGap in chasm/worker/brake.go).
//
// A refusal of such a heartbeat with room for another attempt (at least retryRoom of its
// deadline left) is retried, not lost: the expiry brake must not read a burst of them as a
// host that loses heartbeats, which would hold every death for a lease after each burst.
// What it is told instead is how long those heartbeats
// may still be on their way (Pressure.RetriedEarly). An attempt refused with too little left
// to be retried, or one that history refuses or drops, counts as lost, as every refusal of
// another client does.
func retriesRefusals(info *tap.Info) bool {
	switch info.FullMethodName {
	case workflowservice.WorkflowService_RecordWorkerHeartbeat_FullMethodName:
		name := info.Header.Get(clientNameHeader)
		return len(name) == 1 && retryingClients[name[0]]
	case livenesspb.WorkerLivenessService_RecordHeartbeat_FullMethodName:
		v := info.Header.Get(RetriesRefusalsHeader)
		return len(v) == 1 && v[0] == "true"
	}
	return false
}

// RetriesRefusalsHeader is the request header in which a caller of the liveness API's
// RecordHeartbeat promises, with the value "true", to retry the call when it is refused with
// ResourceExhausted, as the Go SDK does its own heartbeat: again after at most 1 s (20 %
// jitter aside), for as long as at least that much of its deadline is left, with a deadline of
// at most admission.RetryHorizon (10 s). Its heartbeats are then patient (retriesRefusals).
//
// The promise matters beyond the caller's own calls: a refusal of such a heartbeat with room
// left is counted as a heartbeat delayed, not lost, so the expiry brake does not hold the
// namespace's expiries for it. A caller that gives up after a refusal must not send it.
const RetriesRefusalsHeader = "vigil-retries-refusals"

// clientNameHeader is the header in which Temporal SDKs name themselves.
const clientNameHeader = "client-name"
