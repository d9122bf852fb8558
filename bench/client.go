package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

// What the simulated workers say about themselves, close to what the Go SDK reports.
const (
	// retryBackoffMin and retryBackoffMax bound the waits between retries of an Unavailable
	// heartbeat (Config.RetryUnavailable).
	retryBackoffMin = 10 * time.Millisecond
	retryBackoffMax = 200 * time.Millisecond
	// refusedBackoffMin is the first wait before a ResourceExhausted heartbeat is retried
	// (Config.RetryResourceExhausted); it doubles up to a tenth of the RPC timeout, as the
	// SDK's retry policy does.
	refusedBackoffMin = 200 * time.Millisecond

	sdkName    = "temporal-go"
	sdkVersion = "1.50.0"
	// slotsPerWorker is the activity slot count reported; bound activities use some of them.
	slotsPerWorker = 1000
)

// simWorker is one worker instance of a simulated client. It is owned by its client's
// goroutine; the run reads it only after that goroutine has returned.
type simWorker struct {
	key       string
	taskQueue string
	started   time.Time
	lastSent  time.Time
	// bound is set once a heartbeat carrying the worker's activity bindings succeeded.
	bound bool
	// answered is set once a heartbeat of the worker was answered OK: the next ones are not
	// its registration.
	answered bool
	// leaseDeadline is the deadline returned by the last successful liveness heartbeat;
	// lastFailed tells that a later heartbeat failed, so the server may hold another one.
	leaseDeadline time.Time
	lastFailed    bool
}

// simClient is one SDK client process: it heartbeats its workers together on one schedule.
type simClient struct {
	r       *runner
	index   int
	rng     *rand.Rand
	wf      workflowservice.WorkflowServiceClient
	lv      livenesspb.WorkerLivenessServiceClient
	workers []*simWorker
	// What the client says about itself, the same in every heartbeat: made once, as the SDK
	// does, so the generator spends its cores on the RPCs it measures.
	ident, hostName, groupingKey, pid string
	// burst is set on the clients of a registration burst: their heartbeats are left out of
	// the fleet's figures. registered is set once their first heartbeat was answered OK.
	burst      *burstWatch
	registered bool

	churn chan struct{} // a restart is due; buffered so the churn ticker never blocks
	kill  chan struct{} // closed to stop abruptly
	done  chan struct{} // closed when the goroutine returns
}

func newSimClient(r *runner, index int) *simClient {
	conn := index % len(r.wf)
	c := &simClient{
		r:     r,
		index: index,
		rng:   rand.New(rand.NewPCG(uint64(r.cfg.Seed), uint64(index))),
		wf:    r.wf[conn],
		lv:    r.lv[conn],
		churn: make(chan struct{}, 1),
		kill:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	c.ident = fmt.Sprintf("%d@%s-%d", r.pid, r.hostName, index)
	c.hostName = fmt.Sprintf("%s-%d", r.hostName, index)
	c.groupingKey = fmt.Sprintf("bench-client-%d", index)
	c.pid = fmt.Sprint(r.pid)
	c.workers = make([]*simWorker, r.cfg.WorkersPerClient)
	for i := range c.workers {
		c.workers[i] = c.newWorker(i)
	}
	return c
}

func (c *simClient) newWorker(slot int) *simWorker {
	n := c.index*c.r.cfg.WorkersPerClient + slot
	return &simWorker{
		key:       uuid.NewString(),
		taskQueue: fmt.Sprintf("bench-tq-%d", n%TaskQueuesDefault),
		started:   time.Now(),
	}
}

// jittered is one wait between heartbeats from at: the interval there ±jitter, uniformly.
func (c *simClient) jittered(at time.Time) time.Duration {
	j := c.r.cfg.Jitter
	return time.Duration(float64(c.r.intervalAt(at)) * (1 - j + 2*j*c.rng.Float64()))
}

// run heartbeats on the client's own schedule until stop is closed (the load ends) or the
// client is killed. Slots are kept on a fixed grid from the first one, so a slow reply delays
// only the heartbeat it belongs to; a slot that passes whole while an RPC is still out is
// counted as missed rather than sent late in a burst.
func (c *simClient) run(ctx context.Context, first time.Time, stop <-chan struct{}) {
	defer close(c.done)
	g := int64(len(c.workers))
	due := first
	// wake is when the timer is meant to fire: the slot's time, or at once for a slot already
	// due when the previous RPC returned. How late it actually fires is the generator's lag.
	wake := later(due, time.Now())
	timer := time.NewTimer(time.Until(wake))
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-c.kill:
			return
		case <-ctx.Done():
			return
		case <-c.churn:
			c.restart(ctx)
			now := time.Now()
			due = now.Add(c.jittered(now))
			wake = due
			timer.Reset(time.Until(wake))
		case <-timer.C:
			// The stop signals win over a timer that fired at the same moment.
			select {
			case <-stop:
				return
			case <-c.kill:
				return
			default:
			}
			if fired := time.Now(); c.counted(fired) {
				c.r.countOffered(fired, g)
				c.r.lag.record(fired.Sub(wake))
			}
			c.heartbeat(ctx)
			now := time.Now()
			due = due.Add(c.jittered(due))
			for !due.Add(c.r.intervalAt(due)).After(now) {
				if c.counted(due) {
					c.r.countOffered(due, g)
					c.r.cnt.missed.Add(g)
				}
				due = due.Add(c.jittered(due))
			}
			wake = later(due, now)
			timer.Reset(wake.Sub(now))
		}
	}
}

// restart is a process restart: every worker shuts down as the SDK does on a clean stop, and
// fresh workers with new instance keys heartbeat at once.
func (c *simClient) restart(ctx context.Context) {
	c.r.cnt.churned.Add(1)
	for i, w := range c.workers {
		c.r.shutdownWorker(ctx, c, w)
		c.workers[i] = c.newWorker(i)
	}
	if now := time.Now(); c.counted(now) {
		c.r.countOffered(now, int64(len(c.workers)))
	}
	c.heartbeat(ctx)
}

// counted says whether a heartbeat of this client sent (or due) at t counts in the fleet's
// figures: past the warm-up, and not one of a registration burst's workers.
func (c *simClient) counted(t time.Time) bool { return c.burst == nil && c.r.measured(t) }

func (c *simClient) heartbeat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.r.cfg.RPCTimeout)
	defer cancel()
	now := time.Now()
	g := int64(len(c.workers))
	measured := c.counted(now)
	if measured {
		c.r.cnt.sent.Add(g)
		c.r.cnt.rpcs.Add(1)
	}
	var err error
	binding := false
	unavailable, refused := 0, 0
	for {
		binding, err = c.send(ctx, now)
		// The SDK retries Unavailable (a host stopping, a shard in motion) and
		// ResourceExhausted (a server behind) with backoff until the call's deadline: the
		// heartbeat is answered late, not lost.
		var wait time.Duration
		switch code := status.Code(err); {
		case err == nil:
		case code == codes.Unavailable && c.r.cfg.RetryUnavailable:
			wait = min(retryBackoffMax, retryBackoffMin<<min(unavailable, 8))
			unavailable++
		case code == codes.ResourceExhausted && c.r.cfg.RetryResourceExhausted:
			wait = min(max(c.r.cfg.RPCTimeout/10, refusedBackoffMin), refusedBackoffMin<<min(refused, 8))
			refused++
		}
		if wait == 0 {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if ctx.Err() != nil {
			break
		}
	}
	took := time.Since(now)
	retries := unavailable + refused
	for _, w := range c.workers {
		w.lastSent = now
		w.lastFailed = err != nil
	}
	if c.r.cfg.Observe != nil {
		c.r.cfg.Observe(now, took, retries, err)
	}
	if err == nil {
		c.r.countAnswered(c)
	}
	if c.r.cfg.ObserveWorkers != nil {
		keys := make([]string, len(c.workers))
		for i, w := range c.workers {
			keys[i] = w.key
		}
		c.r.cfg.ObserveWorkers(keys, now, took, err)
	}
	if !measured {
		return
	}
	if retries > 0 {
		c.r.cnt.retried.Add(1)
		c.r.cnt.retries.Add(int64(unavailable))
		c.r.cnt.retriesRefused.Add(int64(refused))
	}
	c.r.lat.record(took)
	if c.r.burst != nil {
		c.r.burst.recordFleet(now, took)
	}
	if binding {
		c.r.bindLat.record(took)
	}
	if err != nil {
		c.r.cnt.failed.Add(g)
		c.r.cnt.rpcErrors.Add(1)
		c.r.cnt.countError(err)
		c.r.countPhase(&c.r.phases.failed, now, g)
		return
	}
	c.r.cnt.ok.Add(g)
	c.r.countPhase(&c.r.phases.ok, now, g)
}

// send is one attempt of a heartbeat sent at now; binding says it carried activity bindings.
func (c *simClient) send(ctx context.Context, now time.Time) (binding bool, err error) {
	switch c.r.cfg.API {
	case APIPublic:
		req := &workflowservice.RecordWorkerHeartbeatRequest{
			Namespace:       c.r.cfg.Namespace,
			Identity:        c.identity(),
			WorkerHeartbeat: make([]*workerapipb.WorkerHeartbeat, len(c.workers)),
		}
		for i, w := range c.workers {
			req.WorkerHeartbeat[i] = c.workerHeartbeat(w, now, enumspb.WORKER_STATUS_RUNNING)
		}
		// It names itself as the SDK it plays; the server serves every client alike.
		ctx = metadata.AppendToOutgoingContext(ctx, "client-name", sdkName, "client-version", sdkVersion)
		_, err = c.wf.RecordWorkerHeartbeat(ctx, req)
	case APILiveness:
		w := c.workers[0]
		req := &livenesspb.RecordHeartbeatRequest{
			Namespace:       c.r.cfg.Namespace,
			Identity:        c.identity(),
			WorkerHeartbeat: c.workerHeartbeat(w, now, enumspb.WORKER_STATUS_RUNNING),
		}
		if c.r.cfg.Lease > 0 {
			req.LeaseDuration = durationpb.New(c.r.cfg.Lease)
		}
		if !w.bound {
			req.BoundActivities = activityBindings(w.key, c.r.cfg.Activities)
			binding = len(req.BoundActivities) > 0
		}
		var resp *livenesspb.RecordHeartbeatResponse
		resp, err = c.lv.RecordHeartbeat(ctx, req)
		if err == nil {
			w.bound = true
			w.leaseDeadline = resp.GetLeaseDeadline().AsTime()
		}
	}
	return binding, err
}

func (c *simClient) identity() string { return c.ident }

// workerHeartbeat is the snapshot an SDK worker sends: who it is, where it runs, its slots
// and pollers, and how long since its previous heartbeat (from which vigil derives the lease).
func (c *simClient) workerHeartbeat(w *simWorker, now time.Time, status enumspb.WorkerStatus) *workerapipb.WorkerHeartbeat {
	used := int32(min(c.r.cfg.Activities, slotsPerWorker))
	hb := &workerapipb.WorkerHeartbeat{
		WorkerInstanceKey: w.key,
		WorkerIdentity:    c.identity(),
		HostInfo: &workerapipb.WorkerHostInfo{
			HostName:          c.hostName,
			WorkerGroupingKey: c.groupingKey,
			ProcessId:         c.pid,
		},
		TaskQueue:     w.taskQueue,
		SdkName:       sdkName,
		SdkVersion:    sdkVersion,
		Status:        status,
		StartTime:     timestamppb.New(w.started),
		HeartbeatTime: timestamppb.New(now),
		ActivityTaskSlotsInfo: &workerapipb.WorkerSlotsInfo{
			CurrentAvailableSlots: slotsPerWorker - used,
			CurrentUsedSlots:      used,
			SlotSupplierKind:      "Fixed",
		},
		WorkflowTaskSlotsInfo: &workerapipb.WorkerSlotsInfo{
			CurrentAvailableSlots: slotsPerWorker,
			SlotSupplierKind:      "Fixed",
		},
		ActivityPollerInfo: &workerapipb.WorkerPollerInfo{CurrentPollers: 2},
		WorkflowPollerInfo: &workerapipb.WorkerPollerInfo{CurrentPollers: 2},
	}
	if !w.lastSent.IsZero() {
		hb.ElapsedSinceLastHeartbeat = durationpb.New(now.Sub(w.lastSent))
	}
	return hb
}

// activityBindings are the worker's synthetic activities: no activity execution exists for
// them, so when the worker dies the activity side answers NOT_FOUND, which counts as handed
// back.
func activityBindings(key string, n int) []*livenesspb.ActivityBinding {
	if n == 0 {
		return nil
	}
	out := make([]*livenesspb.ActivityBinding, n)
	for i := range out {
		out[i] = &livenesspb.ActivityBinding{ActivityId: fmt.Sprintf("bench-%s-%d", key, i), Stamp: 1}
	}
	return out
}
