package bench

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"

	"github.com/vigilhq/vigil/common/metrics"
)

// backlogMetric is the server's gauge of outbound tasks not yet delivered, one series per
// shard (vigil_outbound_task_backlog); after a kill those are the reschedule batches of the
// dead workers' activities.
var backlogMetric = metrics.OutboundTaskBacklog.ExportedName()

// victim is a killed worker as the watcher sees it. Times are on this machine's clock, which
// is the server's (the generator only loads loopback addresses).
type victim struct {
	key    string
	client *simClient
	// leaseDeadline is the deadline of the worker's last accepted heartbeat: from the reply
	// (liveness API) or from the server's record right after the kill (public API, whose
	// replies carry none).
	leaseDeadline time.Time
	boundAtKill   int64
	// detectedAt is when a DescribeWorkerLiveness reply first showed the worker not ACTIVE;
	// inactiveTime is the server's own record of that transition.
	detectedAt   time.Time
	inactiveTime time.Time
	reason       livenesspb.InactiveReason
	// handedBackAt is when a reply first showed it INACTIVE with no activity still bound.
	handedBackAt time.Time
	lastErr      error
}

// killWatch follows the killed workers until every one is INACTIVE with its activities handed
// back, or RecoveryTimeout passes.
type killWatch struct {
	r        *runner
	killedAt time.Time

	mu             sync.Mutex
	victims        []*victim
	backlogEmptyAt time.Time
	backlogErr     error
	timedOut       bool

	cancel context.CancelFunc
	done   chan struct{}
}

// kill stops K workers' clients abruptly: no ShutdownWorker, no last heartbeat. An RPC already
// on the wire is let finish, so the lease of the last heartbeat is known.
func (r *runner) kill(ctx context.Context, rng *rand.Rand) *killWatch {
	live := r.liveClients()
	rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	chosen := live[:min(len(live), r.cfg.Kill/r.cfg.WorkersPerClient)]
	k := &killWatch{r: r, killedAt: time.Now(), done: make(chan struct{})}
	for _, c := range chosen {
		close(c.kill)
	}
	for _, c := range chosen {
		<-c.done
		for _, w := range c.workers {
			v := &victim{key: w.key, client: c}
			if r.cfg.API == APILiveness && !w.lastFailed {
				v.leaseDeadline = w.leaseDeadline
			}
			k.victims = append(k.victims, v)
		}
	}
	ctx, k.cancel = context.WithTimeout(context.WithoutCancel(ctx), r.cfg.RecoveryTimeout)
	go k.watch(ctx)
	return k
}

func (k *killWatch) watch(ctx context.Context) {
	defer close(k.done)
	r := k.r
	// One look at every victim at once: the lease deadline where the reply did not carry it,
	// and how many activities the server holds bound to it.
	k.describe(ctx, k.victims, true)

	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	for {
		due := k.pending(time.Now())
		if due == nil {
			break
		}
		k.describe(ctx, due, false)
		select {
		case <-ctx.Done():
			k.mu.Lock()
			k.timedOut = true
			k.mu.Unlock()
			return
		case <-t.C:
		}
	}
	if r.cfg.MetricsURL == "" {
		return
	}
	for {
		n, err := outboundBacklog(ctx, r.cfg.MetricsURL)
		if err == nil && n == 0 {
			k.mu.Lock()
			k.backlogEmptyAt = time.Now()
			k.mu.Unlock()
			return
		}
		if err != nil && ctx.Err() == nil {
			k.mu.Lock()
			k.backlogErr = err
			k.mu.Unlock()
			if strings.Contains(err.Error(), "not exported") {
				return
			}
		}
		select {
		case <-ctx.Done():
			k.mu.Lock()
			k.timedOut = true
			k.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// pending returns the victims worth describing now: not yet handed back, and past (or within
// one poll of) their lease deadline. Nil when every victim is handed back.
func (k *killWatch) pending(now time.Time) []*victim {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*victim
	remaining := false
	for _, v := range k.victims {
		if !v.handedBackAt.IsZero() {
			continue
		}
		remaining = true
		if v.leaseDeadline.IsZero() || !now.Before(v.leaseDeadline.Add(-k.r.cfg.PollInterval)) {
			out = append(out, v)
		}
	}
	if remaining && out == nil {
		return []*victim{}
	}
	return out
}

func (k *killWatch) describe(ctx context.Context, victims []*victim, first bool) {
	sem := make(chan struct{}, maxPollersInFlight)
	var wg sync.WaitGroup
	for _, v := range victims {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			callCtx, cancel := context.WithTimeout(ctx, k.r.cfg.RPCTimeout)
			resp, err := v.client.lv.DescribeWorkerLiveness(callCtx, &livenesspb.DescribeWorkerLivenessRequest{
				Namespace: k.r.cfg.Namespace, WorkerInstanceKey: v.key,
			})
			cancel()
			k.observe(v, resp.GetWorker(), err, time.Now(), first)
		})
	}
	wg.Wait()
}

func (k *killWatch) observe(v *victim, w *livenesspb.WorkerLiveness, err error, at time.Time, first bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v.lastErr = err
	if status.Code(err) == codes.NotFound {
		// Forgotten after cleanup: nothing of it is left to hand back.
		if v.detectedAt.IsZero() {
			v.detectedAt = at
		}
		if v.handedBackAt.IsZero() {
			v.handedBackAt = at
		}
		return
	}
	if err != nil {
		return
	}
	if first {
		if v.leaseDeadline.IsZero() {
			v.leaseDeadline = w.GetLeaseDeadline().AsTime()
		}
		v.boundAtKill = w.GetBoundActivityCount()
	}
	if w.GetState() == livenesspb.LivenessState_LIVENESS_STATE_ACTIVE {
		return
	}
	if v.detectedAt.IsZero() {
		v.detectedAt = at
		v.inactiveTime = w.GetInactiveTime().AsTime()
		v.reason = w.GetInactiveReason()
	}
	// Handed back: nothing bound any more and every reschedule batch acknowledged by its shard.
	if v.handedBackAt.IsZero() && w.GetBoundActivityCount() == 0 && w.GetPendingRescheduleActivities() == 0 {
		v.handedBackAt = at
	}
}

func (k *killWatch) progress() (detected, handedBack int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, v := range k.victims {
		if !v.detectedAt.IsZero() {
			detected++
		}
		if !v.handedBackAt.IsZero() {
			handedBack++
		}
	}
	return detected, handedBack
}

// finished is true once the watch has ended; a nil watch (no kill yet) has not.
func (k *killWatch) finished() bool {
	if k == nil {
		return false
	}
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

func (k *killWatch) stop() {
	k.cancel()
	<-k.done
}

// scrapeCounters reads each of defs' series (summed over their labels) from a Prometheus
// endpoint, keyed by the declared name; a metric not exported reads 0.
func scrapeCounters(ctx context.Context, url string, defs ...metrics.Definition) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out := make(map[string]float64, len(defs))
	for _, d := range defs {
		out[d.Name()] = 0
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		for _, d := range defs {
			if name == d.ExportedName() {
				fields := strings.Fields(line)
				if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
					out[d.Name()] += v
				}
			}
		}
	}
	return out, sc.Err()
}

// outboundBacklog sums the server's outbound backlog gauge over its shards.
func outboundBacklog(ctx context.Context, url string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var sum float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		if name != backlogMetric {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%s is not exported at %s", backlogMetric, url)
	}
	return sum, nil
}
