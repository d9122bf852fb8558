package tests

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/chasm/worker"
	"github.com/vigilhq/vigil/common/shard"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/tests/testcluster"
)

const clusterShards = 16

// startClusterWorkers starts SDK workers (one client each, heartbeating every second) on
// address until at least one of them lives on a shard of onHost, and returns their keys.
func startClusterWorkers(t *testing.T, address string, hosts []*testcluster.Cluster, onHost string) []string {
	t.Helper()
	owners := testcluster.Owners(hosts...)
	nsID := namespace.DeriveID("default")
	var keys []string
	covered := false
	for i := 0; i < 40 && (len(keys) < 6 || !covered); i++ {
		key := startSDKWorker(t, dialSDK(t, address), "cluster-orders")
		keys = append(keys, key)
		if owners[shard.ForKey(nsID, key, clusterShards)] == onHost {
			covered = true
		}
	}
	require.True(t, covered, "no worker landed on a shard of %s", onHost)
	return keys
}

// TestClusterHostCrash: three hosts on one PostgreSQL, SDK workers connected to host 1. Host 2
// dies without a handoff; its shards are taken over by the live hosts once its membership
// expires, and no worker that kept heartbeating is ever declared INACTIVE (the new owners give
// the leases of the moved shards the restart grace).
func TestClusterHostCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	hosts := testcluster.NewHosts(t, 3, testcluster.Options{NumShards: clusterShards})
	keys := startClusterWorkers(t, hosts[0].Address(), hosts, "host-2")
	liveness := dialLiveness(t, hosts[0].Address())
	time.Sleep(2 * time.Second) // a few heartbeats: leases adapt to 3 × 1 s
	requireDescribedCluster(t, hosts[2].Address(), hosts[0], hosts[1], hosts[2])

	before := testcluster.Owners(hosts...)
	// The crash is the call's start (renewals and shards stop first); the call then stops the
	// servers, which can take their whole stop timeout (5 s), longer than the failover.
	crashedAt := time.Now()
	crashed := make(chan struct{})
	go func() {
		defer close(crashed)
		hosts[1].Crash()
	}()
	testcluster.WaitForOwnership(t, hosts[0], hosts[2])
	failover := time.Since(crashedAt)
	<-crashed
	t.Logf("every shard owned by a live host %v after the crash", failover.Round(time.Millisecond))
	// The target is 5 s (TTL 3 s + one poll + acquisitions); the bound leaves room for a
	// loaded machine, and the test logs the figure.
	require.Less(t, failover, 10*time.Second)
	requireDescribedCluster(t, hosts[2].Address(), hosts[0], hosts[2])

	// Every worker is ACTIVE after the takeover and none was declared INACTIVE meanwhile.
	describe := func(key string) *livenesspb.WorkerLiveness {
		resp, err := liveness.DescribeWorkerLiveness(context.Background(), &livenesspb.DescribeWorkerLivenessRequest{Namespace: "default", WorkerInstanceKey: key})
		require.NoError(t, err)
		return resp.GetWorker()
	}
	require.Zero(t, settledResurrections(t, keys, describe), "a worker that kept heartbeating was declared INACTIVE (moved shards: %v)",
		movedShards(before, testcluster.Owners(hosts[0], hosts[2])))
}

func movedShards(before, after map[int32]string) []int32 {
	var out []int32
	for s := int32(1); s <= clusterShards; s++ {
		if before[s] != after[s] {
			out = append(out, s)
		}
	}
	return out
}

// requireDescribedCluster checks that DescribeCluster, asked at address, lists exactly the
// live hosts, with the shards each serves.
func requireDescribedCluster(t *testing.T, address string, live ...*testcluster.Cluster) {
	t.Helper()
	resp, err := dialLiveness(t, address).DescribeCluster(context.Background(), &livenesspb.DescribeClusterRequest{})
	require.NoError(t, err)
	require.EqualValues(t, clusterShards, resp.GetNumShards())
	require.Empty(t, resp.GetUnownedShards())
	require.Len(t, resp.GetHosts(), len(live))
	owners := testcluster.Owners(live...)
	for i, h := range resp.GetHosts() {
		self := live[i].Server().Engine().Membership().Self()
		require.Equal(t, self.ID, h.GetHostId())
		require.Equal(t, live[i].Address(), h.GetFrontendAddress())
		require.Equal(t, self.HistoryAddress, h.GetHistoryAddress())
		require.NotNil(t, h.GetLastRenewalTime())
		for _, s := range h.GetShards() {
			require.Equal(t, self.ID, owners[s], "shard %d", s)
		}
	}
}

// TestClusterRollingRestart stops hosts 2 and 3 gracefully one after the other and starts them
// again, while SDK workers heartbeat through host 1: each stop hands its shards off, so no
// worker is ever declared INACTIVE. (Host 1 is the SDKs' endpoint; restarting it is a
// client-side reconnect, not a handoff.)
func TestClusterRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	pg := testcluster.NewPostgres(t)
	opts := testcluster.Options{NumShards: clusterShards, Postgres: pg}
	hosts := testcluster.NewHosts(t, 3, opts)
	keys := startClusterWorkers(t, hosts[0].Address(), hosts, "host-2")
	liveness := dialLiveness(t, hosts[0].Address())
	time.Sleep(2 * time.Second) // leases adapt to 3 × 1 s

	checkWorkers := func(d time.Duration) {
		t.Helper()
		for end := time.Now().Add(d); ; {
			for _, key := range keys {
				resp, err := liveness.DescribeWorkerLiveness(context.Background(), &livenesspb.DescribeWorkerLivenessRequest{Namespace: "default", WorkerInstanceKey: key})
				require.NoError(t, err)
				require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_ACTIVE, resp.GetWorker().GetState(), "worker %s", key)
				require.Zero(t, resp.GetWorker().GetResurrectionCount(), "worker %s was INACTIVE for a while", key)
			}
			if time.Now().After(end) {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, i := range []int{1, 2} {
		stoppedAt := time.Now()
		hosts[i].Stop()
		live := []*testcluster.Cluster{hosts[0], hosts[3-i]}
		testcluster.WaitForOwnership(t, live...)
		t.Logf("host-%d stopped: its shards owned again after %v", i+1, time.Since(stoppedAt).Round(time.Millisecond))
		checkWorkers(4 * time.Second) // longer than a lease: a heartbeat lost in the handoff would show

		o := opts
		o.HostID = fmt.Sprintf("host-%d", i+1)
		hosts[i] = testcluster.New(t, o)
		testcluster.WaitForOwnership(t, hosts...)
		checkWorkers(4 * time.Second)
	}
}

// startSDKWorker starts a worker of taskQueue on c and returns its worker instance key once it
// is listed RUNNING.
func startSDKWorker(t *testing.T, c client.Client, taskQueue string) string {
	t.Helper()
	identity := "cluster-worker-" + uuid.NewString()
	w := sdkworker.New(c, taskQueue, sdkworker.Options{Identity: identity})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "noop"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return waitForWorker(t, c, fmt.Sprintf("WorkerIdentity = %q", identity)).GetWorkerInstanceKey()
}

// TestClusterBrakeSeesAnotherHostBehind: two hosts on one PostgreSQL, workers connected to host
// 1. Host 1's write path slows until its heartbeats wait longer than
// history.expiryBrakeQueueDelay: it is behind, and a heartbeat that reaches it for a shard of
// host 2 may be refused or lost there, before host 2 sees it. Host 2, itself idle, learns that
// from host 1's membership row and holds its expiries too (its brake shows engaged); once host
// 1 has caught up, host 2's brake comes off.
func TestClusterBrakeSeesAnotherHostBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	pg := testcluster.NewPostgres(t)
	slow := &testcluster.SlowWrites{}
	opts := testcluster.Options{NumShards: clusterShards, Postgres: pg, DynamicConfig: map[dynamicconfig.Key]any{
		dynamicconfig.ExpiryBrakeQueueDelay.Key(): "300ms",
		dynamicconfig.ExpiryBrakeCooldown.Key():   "1s",
		// Every heartbeat written, so that host 1's slow writes hold its heartbeats back: the
		// ones answered from memory would not wait for them.
		worker.HeartbeatWriteInterval.Key(): "0s",
	}}
	opts1, opts2 := opts, opts
	opts1.HostID, opts1.SlowWrites = "host-1", slow
	opts2.HostID = "host-2"
	host1 := testcluster.New(t, opts1)
	host2 := testcluster.New(t, opts2)
	testcluster.WaitForOwnership(t, host1, host2)

	// One worker on a shard of each host, both heartbeating through host 1.
	owners := testcluster.Owners(host1, host2)
	nsID := namespace.DeriveID("default")
	keyOn := func(host string) string {
		return testcluster.KeyOwnedBy(t, owners, host, "worker", nsID, clusterShards)
	}
	onHost1, onHost2 := keyOn("host-1"), keyOn("host-2")
	workers := newFleet(t, dialLiveness(t, host1.Address()), 100*time.Millisecond, time.Minute)
	workers.start(onHost1, onHost2)
	require.Eventually(t, func() bool { return workers.minBeats([]string{onHost1, onHost2}) >= 2 }, 30*time.Second, 20*time.Millisecond)
	atHost2 := dialLiveness(t, host2.Address())
	require.False(t, describeBrake(t, atHost2, onHost2).GetEngaged())

	slow.Set(time.Second)
	require.Eventually(t, func() bool {
		b := describeBrake(t, atHost2, onHost2)
		return b.GetEngaged() && slices.Contains(b.GetReasons(), worker.BrakeReasonBehind)
	}, 30*time.Second, 50*time.Millisecond, "host 2's brake does not see host 1 behind")

	slow.Set(0)
	require.Eventually(t, func() bool { return !describeBrake(t, atHost2, onHost2).GetEngaged() },
		30*time.Second, 50*time.Millisecond, "host 2's brake does not come off once host 1 caught up")
	neverInactive(t, atHost2, []string{onHost1, onHost2})
}
