package tests

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/bench"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// heartbeatLog keeps what the bench load saw: every heartbeat's send time, latency (retries
// included), retries and final error.
type heartbeatLog struct {
	mu      sync.Mutex
	samples []heartbeatSample
}

type heartbeatSample struct {
	sent    time.Time
	took    time.Duration
	retries int
	err     error
}

func (l *heartbeatLog) observe(sent time.Time, took time.Duration, retries int, err error) {
	l.mu.Lock()
	l.samples = append(l.samples, heartbeatSample{sent, took, retries, err})
	l.mu.Unlock()
}

// answeredSince counts the heartbeats sent at or after from that were answered OK.
func (l *heartbeatLog) answeredSince(from time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.samples {
		if !s.sent.Before(from) && s.err == nil {
			n++
		}
	}
	return n
}

// window describes the heartbeats sent in [from, to): how many, the longest and when it was
// sent, how many needed retries, and the failures.
func (l *heartbeatLog) window(from, to time.Time) (n int, longest time.Duration, longestSent time.Time, retried int, failed []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.samples {
		if s.sent.Before(from) || !s.sent.Before(to) {
			continue
		}
		n++
		if s.took > longest {
			longest, longestSent = s.took, s.sent
		}
		if s.retries > 0 {
			retried++
		}
		if s.err != nil {
			failed = append(failed, s.err)
		}
	}
	return n, longest, longestSent, retried, failed
}

// TestClusterProcessRollingRestartUnderBench: three `vigil server` processes on one fresh
// PostgreSQL database carry a `vigil bench` fleet (SDK heartbeats, every second) that reaches
// the cluster as an SDK behind a load balancer does: round robin over the hosts that answer,
// Unavailable and ResourceExhausted retried as the SDK retries them. Each host in turn is stopped gracefully and started again, and waited
// for until it is a live member serving its shards. Every heartbeat is answered (a retried
// Unavailable or refusal that then succeeded counts as answered) and no worker is ever declared
// INACTIVE. The longest heartbeat of each handoff is logged.
func TestClusterProcessRollingRestartUnderBench(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	const workers = 200
	pg := testcluster.NewPostgres(t)
	hosts := []*hostProcess{startClusterProcess(t, pg, "host-1"), startClusterProcess(t, pg, "host-2"), startClusterProcess(t, pg, "host-3")}
	all := []string{"host-1", "host-2", "host-3"}
	waitForCluster(t, hosts[0].address, all...)
	addresses := make([]string, len(hosts))
	for i, h := range hosts {
		addresses[i] = h.address
	}

	var hbs heartbeatLog
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		s   bench.Summary
		err error
	}
	done := make(chan result, 1)
	loadStart := time.Now()
	go func() {
		s, err := bench.Run(ctx, bench.Config{
			Address:          strings.Join(addresses, ","),
			API:              bench.APIPublic,
			Workers:          workers,
			Interval:         time.Second,
			Duration:         time.Hour, // until cancelled
			Connections:      4,
			RetryUnavailable: true,
			// A host behind during a handoff refuses early; the SDK retries that too.
			RetryResourceExhausted: true,
			RPCTimeout:             10 * time.Second,
			Observe:                hbs.observe,
			Seed:                   1,
		}, nil)
		done <- result{s, err}
	}()
	// Every worker registered and heartbeat twice more: leases adapt to 3 × 1 s.
	require.Eventually(t, func() bool { return hbs.answeredSince(loadStart) >= 3*workers }, 2*time.Minute, 50*time.Millisecond,
		"the fleet never got going")

	for i, h := range hosts {
		phaseStart := time.Now()
		require.NoError(t, h.cmd.Process.Signal(syscall.SIGTERM)) // graceful stop: hand off, leave, stop
		require.NoError(t, h.cmd.Wait())
		stopped := time.Now()
		var others []string
		for j, id := range all {
			if j != i {
				others = append(others, id)
			}
		}
		handedOff := waitForCluster(t, hosts[(i+1)%len(hosts)].address, others...)
		hosts[i] = startClusterProcessAt(t, pg, &hostProcess{id: h.id, address: h.address, http: h.http})
		waitForCluster(t, hosts[(i+1)%len(hosts)].address, all...)
		rejoined := time.Now()
		// Every worker heartbeat once more after the host took its shards back.
		require.Eventually(t, func() bool { return hbs.answeredSince(rejoined) >= workers }, 2*time.Minute, 50*time.Millisecond,
			"heartbeats stopped being answered after %s rejoined", h.id)
		n, longest, longestSent, retried, failed := hbs.window(phaseStart, time.Now())
		t.Logf("%s: stop took %v, its shards owned by the others %v after it exited, back and serving %v after it exited; "+
			"%d heartbeats sent meanwhile, longest %v (sent %v after the SIGTERM), %d answered after a retry (Unavailable or ResourceExhausted)",
			h.id, stopped.Sub(phaseStart).Round(time.Millisecond), handedOff.Round(time.Millisecond),
			rejoined.Sub(stopped).Round(time.Millisecond), n, longest.Round(time.Millisecond),
			longestSent.Sub(phaseStart).Round(time.Millisecond), retried)
		require.Empty(t, failed, "heartbeats not answered around %s's restart", h.id)
	}

	// A lease and more of heartbeats after the last restart, then the liveness list: every
	// worker is ACTIVE and none was ever INACTIVE (a worker declared INACTIVE and heartbeating
	// again would be resurrected, and counted).
	settle := time.Now()
	require.Eventually(t, func() bool { return hbs.answeredSince(settle) >= 4*workers }, 2*time.Minute, 50*time.Millisecond)
	liveness := dialLiveness(t, hosts[0].address)
	var listed, active, resurrections int
	var token []byte
	for {
		resp, err := liveness.ListWorkerLiveness(context.Background(), &livenesspb.ListWorkerLivenessRequest{
			Namespace: "default", PageSize: 1000, NextPageToken: token})
		require.NoError(t, err)
		for _, w := range resp.GetWorkers() {
			listed++
			if w.GetState() == livenesspb.LivenessState_LIVENESS_STATE_ACTIVE {
				active++
			}
			resurrections += int(w.GetResurrectionCount())
			require.Nil(t, w.GetInactiveTime(), "worker %s was declared INACTIVE: %v", w.GetWorkerInstanceKey(), w)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	// The load stops here: the heartbeats it cancels in flight are not failures.
	stopLoad := time.Now()
	cancel()
	res := <-done
	require.ErrorIs(t, res.err, context.Canceled)
	s := res.s
	t.Logf("bench: %d heartbeats sent, %d ok, %d answered after %d retried Unavailable; p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		s.HeartbeatsSent, s.HeartbeatsOK, s.RPCsRetried, s.RetriesUnavailable, s.P50Ms, s.P99Ms, s.MaxMs)
	n, longest, _, _, failed := hbs.window(loadStart, stopLoad.Add(-bench.RPCTimeoutDefault))
	require.Empty(t, failed, "every heartbeat is answered")
	t.Logf("%d heartbeats sent before the last %v of the load, all answered, the longest after %v", n, bench.RPCTimeoutDefault, longest.Round(time.Millisecond))
	_, _, _, _, failed = hbs.window(loadStart, stopLoad)
	for _, err := range failed {
		require.Equal(t, codes.Canceled, status.Code(err), "only heartbeats cut short by the end of the load may fail")
	}
	require.Equal(t, workers, listed, "the fleet's workers, each listed once")
	require.Equal(t, workers, active, "every worker ACTIVE")
	require.Zero(t, resurrections, "no worker was declared INACTIVE during the rolling restart")
}
