package frontend

import (
	"context"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/memrelease"
	"github.com/vigilhq/vigil/frontend/namespace"
)

// Connection tracking (docs/concepts.md, "Connection suspicion"): the frontend knows which gRPC
// connection each worker polls and heartbeats on. When the last connection that carried a
// worker closes without its ShutdownWorker, the worker is reported suspect to its shard; when a
// worker shows up on a connection of this host where it had none, it is reported seen, which
// clears a suspicion raised by this host or by another one (a worker that reconnected
// elsewhere). The SDK polls again at once after it reconnects, long before its next heartbeat,
// so the poll is what clears a live worker in time.

// ConnectionReporter is what connection tracking needs of history; the routed HistoryClient
// implements it. A HistoryClient without it (unit-test fakes) turns tracking off.
type ConnectionReporter interface {
	ShardFor(namespaceID, workerInstanceKey string) int32
	ReportConnections(ctx context.Context, req *workerpb.ReportConnectionsRequest) (*workerpb.ReportConnectionsResponse, error)
}

// ReportConnections sends connection reports of one shard's workers to that shard.
func (c *routedHistoryClient) ReportConnections(ctx context.Context, req *workerpb.ReportConnectionsRequest) (*workerpb.ReportConnectionsResponse, error) {
	client, err := c.client(req.GetShardId())
	if err != nil {
		return nil, err
	}
	return client.ReportConnections(ctx, req)
}

const (
	// maxWorkersPerConn bounds the workers remembered per connection. The SDK shares one
	// connection among the workers of a client, a handful in practice; keys beyond the bound
	// are not tracked (their leases still apply).
	maxWorkersPerConn = 256
	// maxPendingReports bounds the reports waiting to be sent; beyond it new ones are dropped
	// (and logged): the lease still finds a dead worker, only later.
	maxPendingReports = 100_000
	// reportAttempts is how often a report is tried before it is given up.
	reportAttempts = 5
	// reportTimeout bounds one ReportConnections call.
	reportTimeout = 5 * time.Second
	// reportRetryDelay is the pause after a round with failures.
	reportRetryDelay = 200 * time.Millisecond
)

// workerRef names a worker as the frontend sees it.
type workerRef struct {
	namespaceID, namespace, key string
}

// caller is who polled or heartbeat as the worker: history ignores a report made on another
// principal's connection than the worker owner's.
type caller struct {
	principal string
	admin     bool
}

// trackedConn is a connection's record: the workers it carried, in the order it first saw them.
// A slice, not a map: most connections carry one worker or a handful (an SDK client's), and
// whether a worker is known on the connection is asked of connTracker.live, the worker's few
// connections.
type trackedConn struct {
	workers []trackedWorker
	closed  bool
}

// trackedWorker is a worker a connection carried, and who called as it there.
type trackedWorker struct {
	ref    workerRef
	caller caller
}

type connKey struct{}

// connTracker is a grpc stats.Handler (connection begin and end) plus what the interceptor
// tells it of each call (which workers it names).
type connTracker struct {
	logger     *zap.Logger
	namespaces *namespace.Registry
	reporter   *connReporter

	// live holds each worker's open connections on this host: one, or a few while an SDK
	// moves to a new connection. A slice of them costs a worker a pointer, where a set would
	// cost a map's group of eight slots. peak is live's largest size since it was made: the
	// map is made anew once a fleet has gone (memrelease.ShrinkMap).
	mu       sync.Mutex
	live     map[workerRef][]*trackedConn
	peak     int
	stopping bool
}

func newConnTracker(client ConnectionReporter, namespaces *namespace.Registry, logger *zap.Logger) *connTracker {
	return &connTracker{
		logger: logger, namespaces: namespaces,
		reporter: newConnReporter(client, logger),
		live:     make(map[workerRef][]*trackedConn),
	}
}

// TagConn gives each connection its own record, found from every call's context.
func (t *connTracker) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, connKey{}, &trackedConn{})
}

// HandleConn reports the workers whose last connection this was.
func (t *connTracker) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnEnd); !ok {
		return
	}
	c, _ := ctx.Value(connKey{}).(*trackedConn)
	if c == nil {
		return
	}
	var lost []report
	t.mu.Lock()
	c.closed = true
	for _, w := range c.workers {
		conns := t.live[w.ref]
		if i := slices.Index(conns, c); i >= 0 {
			conns = slices.Delete(conns, i, i+1)
			if len(conns) == 0 {
				delete(t.live, w.ref)
				lost = append(lost, report{ref: w.ref, caller: w.caller, lost: true})
			} else {
				t.live[w.ref] = conns
			}
		}
	}
	c.workers = nil
	t.live, _ = memrelease.ShrinkMap(t.live, &t.peak, memrelease.ShrinkMapMin)
	stopping := t.stopping
	t.mu.Unlock()
	if !stopping {
		t.reporter.enqueue(lost...)
	}
}

// TagRPC and HandleRPC complete stats.Handler; calls are seen by intercept.
func (t *connTracker) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (t *connTracker) HandleRPC(context.Context, stats.RPCStats)                       {}

// intercept notes the workers a call names, before the handler runs (a long poll stays open
// for a minute). It runs after auth, so only callers allowed in the namespace are tracked.
func (t *connTracker) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	switch r := req.(type) {
	case *workflowservice.PollActivityTaskQueueRequest:
		t.seen(ctx, r.GetNamespace(), r.GetWorkerInstanceKey())
	case *workflowservice.PollWorkflowTaskQueueRequest:
		t.seen(ctx, r.GetNamespace(), r.GetWorkerInstanceKey())
	case *workflowservice.RecordWorkerHeartbeatRequest:
		for _, hb := range r.GetWorkerHeartbeat() {
			// A stopping worker's last heartbeats say so; its ShutdownWorker has been sent.
			if s := hb.GetStatus(); s != enumspb.WORKER_STATUS_SHUTTING_DOWN && s != enumspb.WORKER_STATUS_SHUTDOWN {
				t.seen(ctx, r.GetNamespace(), hb.GetWorkerInstanceKey())
			}
		}
	case *workflowservice.ShutdownWorkerRequest:
		t.shutdown(r.GetNamespace(), r.GetWorkerInstanceKey())
	}
	// The worker-command poll (PollNexusTaskQueue) carries a key of its own that no heartbeat
	// names: not tracked.
	return handler(ctx, req)
}

func (t *connTracker) ref(namespaceName, key string) (workerRef, *namespace.Namespace, bool) {
	if key == "" {
		return workerRef{}, nil, false
	}
	ns, err := t.namespaces.GetByName(namespaceName)
	if err != nil {
		return workerRef{}, nil, false
	}
	return workerRef{namespaceID: ns.ID, namespace: ns.Name, key: key}, ns, true
}

func (t *connTracker) seen(ctx context.Context, namespaceName, key string) {
	c, _ := ctx.Value(connKey{}).(*trackedConn)
	if c == nil {
		return
	}
	ref, ns, ok := t.ref(namespaceName, key)
	if !ok {
		return
	}
	t.mu.Lock()
	conns := t.live[ref]
	if slices.Contains(conns, c) || c.closed || t.stopping || len(c.workers) >= maxWorkersPerConn {
		t.mu.Unlock()
		return
	}
	// Only a worker new on this connection gets this far: every later poll and heartbeat
	// (the hot path) stops at the check above.
	var who caller
	who.principal, who.admin = principalOf(ctx, ns)
	c.workers = append(c.workers, trackedWorker{ref: ref, caller: who})
	first := len(conns) == 0
	t.live[ref] = append(conns, c)
	t.peak = max(t.peak, len(t.live))
	t.mu.Unlock()
	if first {
		// New on this host: it may be suspect here or on another host (it reconnected).
		t.reporter.enqueue(report{ref: ref, caller: who, lost: false})
	}
}

// shutdown forgets a worker that said goodbye: its connections closing is not news.
func (t *connTracker) shutdown(namespaceName, key string) {
	ref, _, ok := t.ref(namespaceName, key)
	if !ok {
		return
	}
	t.mu.Lock()
	for _, c := range t.live[ref] {
		c.workers = slices.DeleteFunc(c.workers, func(w trackedWorker) bool { return w.ref == ref })
	}
	delete(t.live, ref)
	t.live, _ = memrelease.ShrinkMap(t.live, &t.peak, memrelease.ShrinkMapMin)
	t.mu.Unlock()
	t.reporter.forget(ref)
}

// stop is called before the server closes its connections: a server that stops is not a
// sign of its workers dying, and no report would reach history in time anyway.
func (t *connTracker) stop() {
	t.mu.Lock()
	t.stopping = true
	t.mu.Unlock()
	t.reporter.stop()
}

// trackedWorkers is how many workers have a live connection to this host (tests, debugging).
func (t *connTracker) trackedWorkers() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}

type report struct {
	ref      workerRef
	caller   caller
	lost     bool
	attempts int
	lastErr  string
}

// connReporter sends reports to their shards, batched: one call per shard per round, rounds
// one after another, so that a worker's reports reach its shard in the order they were made
// (a loss, then the clear of its reconnection). A newer report of a worker replaces one not
// yet sent.
type connReporter struct {
	client ConnectionReporter
	logger *zap.Logger

	mu      sync.Mutex
	pending map[workerRef]report
	wake    chan struct{}
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newConnReporter(client ConnectionReporter, logger *zap.Logger) *connReporter {
	r := &connReporter{
		client: client, logger: logger,
		pending: make(map[workerRef]report),
		wake:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go r.run()
	return r
}

func (r *connReporter) enqueue(reports ...report) {
	if len(reports) == 0 {
		return
	}
	r.mu.Lock()
	dropped := 0
	for _, rep := range reports {
		if _, replaces := r.pending[rep.ref]; !replaces && len(r.pending) >= maxPendingReports {
			dropped++
			continue
		}
		r.pending[rep.ref] = rep
	}
	r.mu.Unlock()
	if dropped > 0 {
		r.logger.Warn("connection reports dropped: too many waiting for history; the leases of these workers still apply",
			zap.Int("dropped", dropped))
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// requeue puts back the reports of a failed round, unless a newer one of the worker came.
func (r *connReporter) requeue(reports []report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rep := range reports {
		if _, newer := r.pending[rep.ref]; newer {
			continue
		}
		if rep.attempts++; rep.attempts >= reportAttempts {
			r.logger.Warn("connection report given up", tag.WorkerID(rep.ref.key), tag.Namespace(rep.ref.namespace),
				zap.Bool("lost", rep.lost), zap.Int("attempts", rep.attempts), zap.String("error", rep.lastErr))
			continue
		}
		r.pending[rep.ref] = rep
	}
}

func (r *connReporter) forget(ref workerRef) {
	r.mu.Lock()
	delete(r.pending, ref)
	r.mu.Unlock()
}

func (r *connReporter) stop() {
	r.once.Do(func() { close(r.quit) })
	<-r.done
}

func (r *connReporter) run() {
	defer close(r.done)
	for {
		select {
		case <-r.quit:
			return
		case <-r.wake:
		}
		r.mu.Lock()
		batch := r.pending
		r.pending = make(map[workerRef]report)
		r.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		if failed := r.send(batch); len(failed) > 0 {
			r.requeue(failed)
			select {
			case <-r.quit:
				return
			case <-time.After(reportRetryDelay):
			}
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
}

// send makes one call per shard, all shards in parallel, and returns the reports that failed.
func (r *connReporter) send(batch map[workerRef]report) []report {
	byShard := make(map[int32][]report)
	for _, rep := range batch {
		shard := r.client.ShardFor(rep.ref.namespaceID, rep.ref.key)
		byShard[shard] = append(byShard[shard], rep)
	}
	var (
		mu     sync.Mutex
		failed []report
		wg     sync.WaitGroup
	)
	for shard, reports := range byShard {
		wg.Go(func() {
			req := &workerpb.ReportConnectionsRequest{ShardId: shard, Reports: make([]*workerpb.ConnectionReport, len(reports))}
			for i, rep := range reports {
				req.Reports[i] = &workerpb.ConnectionReport{
					NamespaceId: rep.ref.namespaceID, Namespace: rep.ref.namespace, WorkerInstanceKey: rep.ref.key,
					Lost: rep.lost, Principal: rep.caller.principal, PrincipalIsAdmin: rep.caller.admin,
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
			resp, err := r.client.ReportConnections(ctx, req)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.logger.Debug("connection reports failed", tag.ShardID(shard), tag.Error(err))
				for _, rep := range reports {
					rep.lastErr = err.Error()
					failed = append(failed, rep)
				}
				return
			}
			for i, e := range resp.GetErrors() {
				if e.GetCode() != 0 && i < len(reports) {
					r.logger.Debug("connection report failed", tag.WorkerID(reports[i].ref.key), zap.String("error", e.GetMessage()))
					rep := reports[i]
					rep.lastErr = e.GetMessage()
					failed = append(failed, rep)
				}
			}
		})
	}
	wg.Wait()
	return failed
}
