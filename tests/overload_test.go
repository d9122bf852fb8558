package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	workerv1 "go.temporal.io/api/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// fleet runs workers on the liveness API, each beating every interval with the given lease,
// until its stop channel closes. Refused beats are retried after a short backoff, as the SDK
// does.
type fleet struct {
	t        *testing.T
	client   livenesspb.WorkerLivenessServiceClient
	interval time.Duration
	lease    time.Duration

	wg       sync.WaitGroup
	mu       sync.Mutex
	stops    map[string]chan struct{}
	beats    map[string]int
	refusals atomic.Int64
}

func newFleet(t *testing.T, client livenesspb.WorkerLivenessServiceClient, interval, lease time.Duration) *fleet {
	f := &fleet{t: t, client: client, interval: interval, lease: lease, stops: map[string]chan struct{}{}, beats: map[string]int{}}
	t.Cleanup(f.stopAll)
	return f
}

func (f *fleet) beat(ctx context.Context, key string) error {
	// As the SDK: a deadline longer than the interval (its RPCs have 10s).
	ctx, cancel := context.WithTimeout(ctx, max(f.interval, 2*time.Second))
	defer cancel()
	_, err := f.client.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{
		Namespace:       "default",
		WorkerHeartbeat: &workerv1.WorkerHeartbeat{WorkerInstanceKey: key, TaskQueue: "overload"},
		LeaseDuration:   durationpb.New(f.lease),
	})
	return err
}

func (f *fleet) start(keys ...string) {
	for _, key := range keys {
		stop := make(chan struct{})
		f.mu.Lock()
		f.stops[key] = stop
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for {
				err := f.beat(context.Background(), key)
				wait := f.interval
				if err != nil {
					if f.refusals.Add(1) <= 3 {
						f.t.Logf("heartbeat of %s failed: %v", key, err)
					}
					wait = 50 * time.Millisecond
				} else {
					f.mu.Lock()
					f.beats[key]++
					f.mu.Unlock()
				}
				select {
				case <-stop:
					return
				case <-time.After(wait):
				}
			}
		}()
	}
}

func (f *fleet) stop(keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, key := range keys {
		if stop, ok := f.stops[key]; ok {
			close(stop)
			delete(f.stops, key)
		}
	}
}

func (f *fleet) stopAll() {
	f.mu.Lock()
	for key, stop := range f.stops {
		close(stop)
		delete(f.stops, key)
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fleet) minBeats(keys []string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	least := -1
	for _, k := range keys {
		if least < 0 || f.beats[k] < least {
			least = f.beats[k]
		}
	}
	return least
}

func keysOf(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

func describeLiveness(t *testing.T, client livenesspb.WorkerLivenessServiceClient, key string) *livenesspb.WorkerLiveness {
	t.Helper()
	return describeRetrying(t, client, key).GetWorker()
}

// describeRetrying describes a worker, retrying while the server sheds reads
// (ResourceExhausted: heartbeats come first), as a client should.
func describeRetrying(t *testing.T, client livenesspb.WorkerLivenessServiceClient, key string) *livenesspb.DescribeWorkerLivenessResponse {
	t.Helper()
	// Bounded, so that a host that never serves the read fails the test by name instead of
	// running into the package's timeout.
	giveUp := time.Now().Add(2 * time.Minute)
	for {
		resp, err := client.DescribeWorkerLiveness(context.Background(), &livenesspb.DescribeWorkerLivenessRequest{
			Namespace: "default", WorkerInstanceKey: key,
		})
		if status.Code(err) == codes.ResourceExhausted && time.Now().Before(giveUp) {
			time.Sleep(20 * time.Millisecond) // backoff before the retry, not a wait for an outcome
			continue
		}
		require.NoError(t, err)
		return resp
	}
}

func describeBrake(t *testing.T, client livenesspb.WorkerLivenessServiceClient, key string) *livenesspb.ExpiryBrake {
	t.Helper()
	return describeRetrying(t, client, key).GetExpiryBrake()
}

// neverInactive checks that each worker is ACTIVE and was never brought back from INACTIVE.
func neverInactive(t *testing.T, client livenesspb.WorkerLivenessServiceClient, keys []string) {
	t.Helper()
	for _, k := range keys {
		w := describeLiveness(t, client, k)
		require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_ACTIVE, w.GetState(), "worker %s", k)
		require.Zero(t, w.GetResurrectionCount(), "worker %s went INACTIVE and came back", k)
	}
}

func countInState(t *testing.T, client livenesspb.WorkerLivenessServiceClient, keys []string, state livenesspb.LivenessState) int {
	t.Helper()
	n := 0
	for _, k := range keys {
		if describeLiveness(t, client, k).GetState() == state {
			n++
		}
	}
	return n
}

// metricsMatching returns the metric lines that contain any of words, for failure messages.
func metricsMatching(httpAddress string, words ...string) string {
	resp, err := http.Get("http://" + httpAddress + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		for _, w := range words {
			if !strings.HasPrefix(line, "#") && strings.Contains(line, w) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// metricLine reads the value of the series whose line starts with prefix (name and labels).
func metricLine(httpAddress, prefix string) (float64, bool) {
	resp, err := http.Get("http://" + httpAddress + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, prefix) {
			var v float64
			if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}

func TestOverloadSlowWritePath(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	slow := &testcluster.SlowWrites{}
	cluster := testcluster.New(t, testcluster.Options{
		SlowWrites: slow,
		DynamicConfig: map[dynamicconfig.Key]any{
			dynamicconfig.AdmissionMaxInFlightPerShard.Key(): 4,
			// Slowed, every write holds its slot for at least the 5ms of its own execution:
			// over this target whatever else the machine does, so the limit must fall.
			dynamicconfig.AdmissionTargetLatency.Key(): "4ms",
			// The fleet's calls have 2s deadlines (the SDK's have 10s): behind means 500ms.
			dynamicconfig.ExpiryBrakeQueueDelay.Key(): "500ms",
		},
	})
	client := dialLiveness(t, cluster.Address())

	live := keysOf("live", 20)
	workers := newFleet(t, client, 500*time.Millisecond, 6*time.Second)
	workers.start(live...)
	require.Eventually(t, func() bool { return workers.minBeats(live) >= 2 }, 60*time.Second, 50*time.Millisecond)

	// The write path slows to about 200 executions a second, and a flood of registrations of
	// new keys and of lists arrives on top of the fleet's 40 heartbeats a second.
	slow.Set(5 * time.Millisecond)
	var exhausted, floodCalls atomic.Int64
	floodCtx, stopFlood := context.WithCancel(context.Background())
	var flood sync.WaitGroup
	for g := range 48 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for i := 0; floodCtx.Err() == nil; i++ {
				ctx, cancel := context.WithTimeout(floodCtx, time.Second)
				var err error
				if i%8 == 7 {
					_, err = client.ListWorkerLiveness(ctx, &livenesspb.ListWorkerLivenessRequest{Namespace: "default", PageSize: 100})
				} else {
					_, err = client.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{
						Namespace:       "default",
						WorkerHeartbeat: &workerv1.WorkerHeartbeat{WorkerInstanceKey: fmt.Sprintf("flood-%d-%d", g, i)},
						LeaseDuration:   durationpb.New(time.Minute),
					})
				}
				cancel()
				floodCalls.Add(1)
				if status.Code(err) == codes.ResourceExhausted {
					exhausted.Add(1)
				}
			}
		}()
	}
	// Beyond capacity: calls are refused with ResourceExhausted (not left to time out), while
	// every live worker keeps beating through several leases' worth of heartbeats.
	start := workers.minBeats(live)
	require.Eventually(t, func() bool {
		return exhausted.Load() >= 100 && workers.minBeats(live) >= start+16
	}, 3*time.Minute, 100*time.Millisecond, "the flood was not refused, or the fleet could not beat")
	t.Logf("flood: %d calls, %d refused with ResourceExhausted", floodCalls.Load(), exhausted.Load())
	// Describes are reads, refused while any write waits: whether a live worker ever went
	// INACTIVE is asked once the flood is over (a resurrection count would show it).

	// The host serves fewer calls at once while its writes are slow (the operator sees the
	// adaptive limit fall below history.admissionMaxInFlightPerShard).
	require.Eventually(t, func() bool {
		limit, ok := metricLine(cluster.HTTPAddress(), metrics.AdmissionInFlightLimit.ExportedName()+" ")
		return ok && limit < 4
	}, time.Minute, 50*time.Millisecond, "the in-flight limit does not adapt")

	// The slowdown ends and the flood stops: the backlog clears and the fleet carries on.
	stopFlood()
	flood.Wait()
	slow.Set(0)
	require.Eventually(t, func() bool {
		queued, ok := metricLine(cluster.HTTPAddress(), metrics.AdmissionQueued.ExportedName()+" ")
		return ok && queued == 0
	}, time.Minute, 50*time.Millisecond, "admission queue does not drain")
	after := workers.minBeats(live)
	require.Eventually(t, func() bool { return workers.minBeats(live) >= after+2 }, time.Minute, 50*time.Millisecond)
	neverInactive(t, client, live)
	require.NoError(t, workers.beat(context.Background(), "after-the-storm"), "a new worker registers again")
}

func TestExpiryBrakeHoldsAMassStop(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{
		DynamicConfig: map[dynamicconfig.Key]any{
			dynamicconfig.ExpiryBrakeThreshold.Key():     0.3,
			dynamicconfig.ExpiryBrakeWindow.Key():        "4s",
			dynamicconfig.ExpiryBrakeMinExpiries.Key():   3,
			dynamicconfig.ExpiryBrakeSecondaryRate.Key(): 0.0,
			dynamicconfig.ExpiryBrakeRecheck.Key():       "500ms",
		},
	})
	client := dialLiveness(t, cluster.Address())
	const lease = 3 * time.Second
	keys := keysOf("w", 20)
	silent, live := keys[:10], keys[10:]
	workers := newFleet(t, client, 300*time.Millisecond, lease)
	workers.start(keys...)
	require.Eventually(t, func() bool { return workers.minBeats(keys) >= 3 }, time.Minute, 50*time.Millisecond)
	// Half of the fleet falls silent at once: the brake engages, and holds their expiries,
	// from the first (no settle time: they are all overdue when the first lease runs out).
	workers.stop(silent...)
	// (Prometheus label values read mass_expiry.)
	engaged := metrics.ExpiryBrakeEngaged.ExportedName() + `{kind="mass_expiry",namespace="default"}`
	require.Eventually(t, func() bool {
		on, ok := metricLine(cluster.HTTPAddress(), engaged)
		return ok && on == 1
	}, time.Minute, 50*time.Millisecond, "the brake does not engage: %s", metricsMatching(cluster.HTTPAddress(), "vigil_worker_", "vigil_admission"))
	brake := describeBrake(t, client, live[0])
	require.True(t, brake.GetEngaged())
	require.Contains(t, brake.GetReasons(), "mass-expiry")
	// Held through several rechecks, well past every silent lease: none expires.
	require.Eventually(t, func() bool {
		deferred, _ := scrapeMetric(t, cluster.HTTPAddress(), metrics.LeaseExpiriesDeferred.ExportedName())
		return deferred >= 50
	}, time.Minute, 50*time.Millisecond)
	require.Zero(t, countInState(t, client, silent, livenesspb.LivenessState_LIVENESS_STATE_INACTIVE),
		"a lease expired while the brake was on")
	neverInactive(t, client, live)

	// The operator releases the brake: the silent workers are detected.
	cluster.DynamicConfig().OverrideValue(dynamicconfig.ExpiryBrakeThreshold.Key(), 1.0)
	require.Eventually(t, func() bool {
		return countInState(t, client, silent, livenesspb.LivenessState_LIVENESS_STATE_INACTIVE) == len(silent)
	}, time.Minute, 100*time.Millisecond)
	neverInactive(t, client, live)

	// With the brake at its default again and off, a few real deaths are found at their
	// deadline.
	cluster.DynamicConfig().OverrideValue(dynamicconfig.ExpiryBrakeThreshold.Key(), 0.55)
	require.Eventually(t, func() bool {
		on, _ := metricLine(cluster.HTTPAddress(), engaged)
		return on == 0 && !describeBrake(t, client, live[0]).GetEngaged()
	}, time.Minute, 50*time.Millisecond)
	dead, survivors := live[:2], live[2:]
	workers.stop(dead...)
	require.Eventually(t, func() bool {
		return countInState(t, client, dead, livenesspb.LivenessState_LIVENESS_STATE_INACTIVE) == len(dead)
	}, time.Minute, 100*time.Millisecond)
	neverInactive(t, client, survivors)
}
