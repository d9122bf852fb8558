package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/common/metrics"
)

// shutdownsInFlight bounds the ShutdownWorker calls sent when the load ends.
const shutdownsInFlight = 64

type runner struct {
	cfg      Config
	out      io.Writer
	pid      int
	hostName string

	conns []*grpc.ClientConn
	wf    []workflowservice.WorkflowServiceClient
	lv    []livenesspb.WorkerLivenessServiceClient

	lat     *latencyRecorder
	bindLat *latencyRecorder // the subset of lat that carried activity bindings
	// lag is how late the clients sent their heartbeats after they were due: the generator's
	// own delay. When it grows, the figures measure the generator as much as the server.
	lag *latencyRecorder
	cnt counters
	// phases counts the settled parts of an alternating run's phases (Config.Alternate).
	phases phaseCounters
	// measureFrom is the end of the warm-up: only heartbeats sent from then on are counted.
	measureFrom time.Time
	clients     []*simClient
	burst       *burstWatch // nil without --register-burst
	// cost reads the server's CPU per heartbeat (cost.go); nil without ServerPID.
	cost *costMeter
}

// Run drives the server described by cfg until the load ends (and, with Kill, until the killed
// workers are accounted for), writing a progress line every second to progress (nil: none). Heartbeat
// failures are measured, not returned: Run fails only when the run cannot start or is
// cancelled.
func Run(ctx context.Context, cfg Config, progress io.Writer) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	cfg = cfg.withDefaults()
	host, _ := os.Hostname()
	r := &runner{cfg: cfg, pid: os.Getpid(), hostName: "bench-" + host, lat: newLatencyRecorder(), bindLat: newLatencyRecorder(), lag: newLatencyRecorder(), out: progress}
	defer r.close()
	if err := r.dial(ctx); err != nil {
		return Summary{}, err
	}

	numClients := cfg.Workers / cfg.WorkersPerClient
	r.clients = make([]*simClient, numClients)
	for i := range r.clients {
		r.clients[i] = newSimClient(r, i)
	}

	if cfg.RegisterBurst > 0 {
		r.burst = newBurstWatch(r, numClients)
	}

	var procs *procSampler
	if cfg.ServerPID > 0 {
		procs = startProcSampler(cfg.ServerPID)
	}
	self := startProcSampler(os.Getpid())

	killRNG := rand.New(rand.NewPCG(uint64(cfg.Seed), math.MaxUint32))
	churnRNG := rand.New(rand.NewPCG(uint64(cfg.Seed), math.MaxUint32-1))
	start := time.Now()
	r.measureFrom = start.Add(cfg.Warmup)
	if cfg.ServerPID > 0 {
		r.cost = startCostMeter(r, cfg.ServerPID, start)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range r.clients {
		// Clients start spread evenly over one interval: a fleet does not boot in one instant.
		first := start.Add(time.Duration(int64(cfg.Interval) * int64(i) / int64(numClients)))
		wg.Go(func() { c.run(ctx, first, stop) })
	}

	var killed *killWatch
	killedCh := make(chan *killWatch, 1)
	background := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { r.progress(start, background, killedCh) })
	if cfg.Churn > 0 {
		bg.Go(func() { r.churnLoop(churnRNG, background) })
	}

	loadEnd := time.NewTimer(cfg.Duration)
	defer loadEnd.Stop()
	killAt := time.NewTimer(cfg.Duration / 2)
	defer killAt.Stop()
	if cfg.Kill == 0 {
		killAt.Stop()
	}
	burstAt := time.NewTimer(cfg.RegisterBurstAt)
	defer burstAt.Stop()
	if r.burst == nil {
		burstAt.Stop()
	}
	var killDone <-chan struct{}
	loadOver := false
	var runErr error
wait:
	for {
		select {
		case <-ctx.Done():
			runErr = ctx.Err()
			break wait
		case <-burstAt.C:
			r.burst.fire(ctx, stop, &wg)
		case <-killAt.C:
			killed = r.kill(ctx, killRNG)
			killedCh <- killed
			killDone = killed.done
		case <-loadEnd.C:
			loadOver = true
			if cfg.Kill == 0 || killed.finished() {
				break wait
			}
		case <-killDone:
			killDone = nil
			if loadOver {
				break wait
			}
		}
	}
	close(background)
	cost := r.cost.stop()
	close(stop)
	wg.Wait()
	end := time.Now()
	bg.Wait()
	if killed != nil {
		killed.stop()
	}

	// The server's own counts of expiries as the load ends, before the shutdowns: a worker
	// still waiting for its ShutdownWorker when its lease runs out expires, which says
	// nothing about the run.
	var atLoadEnd map[string]float64
	if cfg.MetricsURL != "" {
		atLoadEnd, _ = scrapeCounters(ctx, cfg.MetricsURL, metrics.WorkerLeaseExpiries, metrics.WorkerResurrections)
	}
	if cfg.ShutdownAtEnd && runErr == nil {
		r.shutdownAll(ctx)
	}
	s := r.summary(r.measureFrom, end, killed)
	if r.burst != nil {
		bs := r.burst.summary(start, end)
		s.Burst = &bs
		s.BurstAllRegisteredMs = bs.AllRegisteredMs
	}
	s.ServerAtLoadEnd = atLoadEnd
	s.Cost = cost
	if procs != nil {
		ps := procs.stop()
		s.Server = &ps
	}
	gs := self.stop()
	s.Generator = &gs
	return s, runErr
}

func (r *runner) dial(ctx context.Context) error {
	addresses := r.cfg.Addresses()
	for range r.cfg.Connections {
		// Each ClientConn is its own HTTP/2 connection, so the load is spread over several
		// server-side transports as a fleet of processes would spread it.
		target, opts := addresses[0], []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if len(addresses) > 1 {
			// Several hosts: round robin over the ones that are up, as a load balancer in
			// front of a cluster does; a host that went away is tried again within a second.
			res := manual.NewBuilderWithScheme("vigil-bench")
			state := resolver.State{}
			for _, a := range addresses {
				state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
			}
			res.InitialState(state)
			target = res.Scheme() + ":///cluster"
			backoffCfg := backoff.DefaultConfig
			backoffCfg.MaxDelay = time.Second
			opts = append(opts, grpc.WithResolvers(res),
				grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
				grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoffCfg, MinConnectTimeout: time.Second}))
		}
		conn, err := grpc.NewClient(target, opts...)
		if err != nil {
			return fmt.Errorf("dial %s: %w", r.cfg.Address, err)
		}
		r.conns = append(r.conns, conn)
		r.wf = append(r.wf, workflowservice.NewWorkflowServiceClient(conn))
		r.lv = append(r.lv, livenesspb.NewWorkerLivenessServiceClient(conn))
	}
	for _, wf := range r.wf {
		callCtx, cancel := context.WithTimeout(ctx, r.cfg.RPCTimeout)
		_, err := wf.DescribeNamespace(callCtx, &workflowservice.DescribeNamespaceRequest{Namespace: r.cfg.Namespace})
		cancel()
		if err != nil {
			return fmt.Errorf("server at %s, namespace %q: %w", r.cfg.Address, r.cfg.Namespace, err)
		}
	}
	return nil
}

func (r *runner) close() {
	for _, conn := range r.conns {
		_ = conn.Close()
	}
}

// measured says whether a heartbeat sent (or a slot due) at t counts: it is past the warm-up.
func (r *runner) measured(t time.Time) bool { return !t.Before(r.measureFrom) }

// churnLoop restarts Churn percent of the live clients every ChurnPeriod.
func (r *runner) churnLoop(rng *rand.Rand, stop <-chan struct{}) {
	t := time.NewTicker(r.cfg.ChurnPeriod)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		live := r.liveClients()
		n := int(math.Round(r.cfg.Churn / 100 * float64(len(live))))
		rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
		for _, c := range live[:n] {
			select {
			case c.churn <- struct{}{}:
			default: // still restarting from the previous round
			}
		}
	}
}

func (r *runner) liveClients() []*simClient {
	live := make([]*simClient, 0, len(r.clients))
	for _, c := range r.clients {
		select {
		case <-c.kill:
		default:
			live = append(live, c)
		}
	}
	return live
}

// shutdownWorker stops one worker as the SDK does: ShutdownWorker with its last snapshot.
func (r *runner) shutdownWorker(ctx context.Context, c *simClient, w *simWorker) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RPCTimeout)
	defer cancel()
	r.cnt.shutdowns.Add(1)
	_, err := c.wf.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{
		Namespace:         r.cfg.Namespace,
		Identity:          c.identity(),
		Reason:            "vigil bench",
		WorkerInstanceKey: w.key,
		WorkerHeartbeat:   c.workerHeartbeat(w, time.Now(), enumspb.WORKER_STATUS_SHUTTING_DOWN),
		TaskQueue:         w.taskQueue,
	})
	if err != nil {
		r.cnt.shutdownErrors.Add(1)
	}
}

// shutdownAll stops every worker still alive, a few dozen at a time.
func (r *runner) shutdownAll(ctx context.Context) {
	sem := make(chan struct{}, shutdownsInFlight)
	var wg sync.WaitGroup
	clients := r.liveClients()
	if r.burst != nil {
		for _, c := range r.burst.clients {
			if c.registered {
				clients = append(clients, c)
			}
		}
	}
	for _, c := range clients {
		for _, w := range c.workers {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				r.shutdownWorker(ctx, c, w)
			})
		}
	}
	wg.Wait()
}

// progress writes one line a second: what the fleet sees right now.
func (r *runner) progress(start time.Time, stop <-chan struct{}, killedCh <-chan *killWatch) {
	if r.out == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var killed *killWatch
	prevOK, prevAt := int64(0), start
	for {
		select {
		case <-stop:
			return
		case k := <-killedCh:
			killed = k
			continue
		case <-t.C:
		}
		now := time.Now()
		ok := r.cnt.ok.Load()
		rate := float64(ok-prevOK) / now.Sub(prevAt).Seconds()
		prevOK, prevAt = ok, now
		alive := len(r.liveClients()) * r.cfg.WorkersPerClient
		line := fmt.Sprintf("%6.0fs  %8.1f hb/s  p99 %8.2f ms  errors %d  alive %d  lag p99 %.0f ms",
			now.Sub(start).Seconds(), rate, r.lat.snapshot().p99, r.cnt.rpcErrors.Load(), alive, r.lag.snapshot().p99)
		if registered, of, ok := r.burst.progress(); ok {
			line += fmt.Sprintf("  burst registered %d/%d", registered, of)
		}
		if killed != nil {
			detected, handedBack := killed.progress()
			line += fmt.Sprintf("  killed %d detected %d handed-back %d", len(killed.victims), detected, handedBack)
		}
		fmt.Fprintln(r.out, line)
	}
}
