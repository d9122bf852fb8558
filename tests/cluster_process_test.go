package tests

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/shard"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// TestClusterServerProcess is not a test: it is one vigil host of a PostgreSQL cluster that
// TestClusterProcesses runs, SIGSTOPs and SIGKILLs.
func TestClusterServerProcess(t *testing.T) {
	hostID := os.Getenv("VIGIL_TEST_CLUSTER_HOST")
	if hostID == "" {
		t.Skip("runs only as a subprocess of a functional test")
	}
	var cfg server.Config
	cfg.Frontend.Address = os.Getenv("VIGIL_TEST_CLUSTER_ADDRESS")
	cfg.Frontend.HTTPAddress = os.Getenv("VIGIL_TEST_CLUSTER_HTTP")
	cfg.History.NumShards = clusterShards
	cfg.Persistence.Driver = "postgres"
	cfg.Persistence.Postgres.DSN = os.Getenv("VIGIL_TEST_CLUSTER_DSN")
	cfg.Persistence.Postgres.Schema = os.Getenv("VIGIL_TEST_CLUSTER_SCHEMA")
	cfg.Cluster.HostID = hostID
	cfg.Log.Level = cmp.Or(os.Getenv("VIGIL_TEST_CLUSTER_LOG_LEVEL"), "error")
	srv, err := server.New(cfg)
	require.NoError(t, err)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	require.NoError(t, srv.Start(ctx))
	fmt.Println("server started")
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Stop(stopCtx)
}

type hostProcess struct {
	id, address, http string
	cmd               *exec.Cmd
}

func startClusterProcess(t *testing.T, pg *testcluster.Postgres, id string) *hostProcess {
	t.Helper()
	return startClusterProcessAt(t, pg, &hostProcess{id: id, address: freeAddress(t), http: freeAddress(t)})
}

// startClusterProcessAt starts the host h describes (its ID and addresses) and waits until it
// listens.
func startClusterProcessAt(t *testing.T, pg *testcluster.Postgres, h *hostProcess) *hostProcess {
	t.Helper()
	id := h.id
	h.cmd = exec.Command(os.Args[0], "-test.run=^TestClusterServerProcess$", "-test.v=false")
	h.cmd.Env = append(os.Environ(), "VIGIL_TEST_CLUSTER_HOST="+id, "VIGIL_TEST_CLUSTER_ADDRESS="+h.address,
		"VIGIL_TEST_CLUSTER_HTTP="+h.http, "VIGIL_TEST_CLUSTER_DSN="+pg.DSN, "VIGIL_TEST_CLUSTER_SCHEMA="+pg.Schema)
	h.cmd.Stdout, h.cmd.Stderr = io.Discard, os.Stderr
	if dir := os.Getenv("VIGIL_TEST_CLUSTER_LOGS"); dir != "" { // to debug: every host's log in a file
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s-%s-%s.log", t.Name(), filepath.Base(pg.Schema), id)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) // a restarted host appends
		require.NoError(t, err)
		t.Cleanup(func() { _ = f.Close() })
		h.cmd.Stderr = f
		h.cmd.Env = append(h.cmd.Env, "VIGIL_TEST_CLUSTER_LOG_LEVEL=info")
	}
	require.NoError(t, h.cmd.Start())
	cmd := h.cmd
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	require.Eventually(t, func() bool {
		conn, err := net.Dial("tcp", h.address)
		if err == nil {
			_ = conn.Close()
		}
		return err == nil
	}, 60*time.Second, 20*time.Millisecond, "host %s did not start", id)
	return h
}

// waitForCluster waits until DescribeCluster, asked at address, shows exactly hostIDs as
// members and every shard owned by one of them; it returns how long that took.
func waitForCluster(t *testing.T, address string, hostIDs ...string) time.Duration {
	t.Helper()
	client := dialLiveness(t, address)
	start := time.Now()
	// last is what the cluster looked like at the last look, for the failure message.
	var last atomic.Value
	last.Store("nothing yet")
	settled := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := client.DescribeCluster(ctx, &livenesspb.DescribeClusterRequest{})
		if err != nil {
			last.Store("DescribeCluster: " + err.Error())
			return false
		}
		last.Store(protojson.Format(resp))
		if len(resp.GetUnownedShards()) > 0 || len(resp.GetHosts()) != len(hostIDs) {
			return false
		}
		owned := 0
		for i, h := range resp.GetHosts() {
			if h.GetHostId() != hostIDs[i] {
				return false
			}
			owned += len(h.GetShards())
		}
		return owned == clusterShards
	}
	if !assert.Eventually(t, settled, 60*time.Second, 20*time.Millisecond, "cluster never settled on %v", hostIDs) {
		t.Fatalf("the cluster as %s last described it: %s", address, last.Load())
	}
	return time.Since(start)
}

var shardLossesMetric = regexp.MustCompile(`(?m)^` + metrics.ShardLosses.ExportedName() + ` (\d+)`)

func shardLosses(t *testing.T, httpAddress string) int {
	t.Helper()
	resp, err := http.Get("http://" + httpAddress + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := shardLossesMetric.FindSubmatch(body)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}

// clusterProcesses starts three `vigil server` processes on one PostgreSQL and six SDK workers
// on host 1, and returns the hosts, the workers' keys and a checker of the workers.
func clusterProcesses(t *testing.T) ([]*hostProcess, []string, func(time.Duration, map[string]int64), func(string) *livenesspb.WorkerLiveness) {
	t.Helper()
	pg := testcluster.NewPostgres(t)
	hosts := []*hostProcess{startClusterProcess(t, pg, "host-1"), startClusterProcess(t, pg, "host-2"), startClusterProcess(t, pg, "host-3")}
	waitForCluster(t, hosts[0].address, "host-1", "host-2", "host-3")
	keys := make([]string, 0, 6)
	for range 6 {
		keys = append(keys, startSDKWorker(t, dialSDK(t, hosts[0].address), "cluster-processes"))
	}
	liveness := dialLiveness(t, hosts[0].address)
	describe := func(key string) *livenesspb.WorkerLiveness {
		resp, err := liveness.DescribeWorkerLiveness(context.Background(), &livenesspb.DescribeWorkerLivenessRequest{Namespace: "default", WorkerInstanceKey: key})
		require.NoError(t, err)
		return resp.GetWorker()
	}
	// checkWorkers requires every worker ACTIVE, with no more resurrections than baseline,
	// for d.
	checkWorkers := func(d time.Duration, baseline map[string]int64) {
		t.Helper()
		for end := time.Now().Add(d); ; {
			for _, key := range keys {
				w := describe(key)
				require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_ACTIVE, w.GetState(), "worker %s (shard %d): %v",
					key, shard.ForKey(namespace.DeriveID("default"), key, clusterShards), w)
				require.Equal(t, baseline[key], w.GetResurrectionCount(), "worker %s (shard %d) was INACTIVE for a while: %v",
					key, shard.ForKey(namespace.DeriveID("default"), key, clusterShards), w)
			}
			if time.Now().After(end) {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second) // leases adapt to 3 × 1 s
	return hosts, keys, checkWorkers, describe
}

// TestClusterProcessSIGKILL: three `vigil server` processes on one PostgreSQL, SDK workers on
// host 1; host 2 is SIGKILLed. The others own every shard again within seconds, and no worker
// (they all keep heartbeating) is ever declared INACTIVE.
func TestClusterProcessSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	hosts, keys, _, describe := clusterProcesses(t)
	require.NoError(t, hosts[1].cmd.Process.Signal(syscall.SIGKILL))
	killedAt := time.Now()
	waitForCluster(t, hosts[0].address, "host-1", "host-3")
	t.Logf("host-2 SIGKILLed: every shard owned by a live host after %v", time.Since(killedAt).Round(time.Millisecond))
	require.Zero(t, settledResurrections(t, keys, describe), "a worker that kept heartbeating was declared INACTIVE during the failover")
}

// settledResurrections waits a lease and more, then until every worker is ACTIVE, and returns
// how many times they were resurrected in all: each is a false INACTIVE of a worker that kept
// heartbeating.
func settledResurrections(t *testing.T, keys []string, describe func(string) *livenesspb.WorkerLiveness) int {
	t.Helper()
	time.Sleep(4 * time.Second)
	total := 0
	require.Eventually(t, func() bool {
		total = 0
		for _, key := range keys {
			w := describe(key)
			if w.GetState() != livenesspb.LivenessState_LIVENESS_STATE_ACTIVE {
				return false
			}
			total += int(w.GetResurrectionCount())
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "a worker that keeps heartbeating stayed INACTIVE")
	return total
}

// TestClusterProcessSIGSTOP is a split brain: host 3 is paused (SIGSTOP) until the others took
// its shards (bumping their range_id). When it resumes, its writes carry a stale range_id and
// are refused; it gives the shards up (shard_losses) and rejoins; the shards settle over three.
func TestClusterProcessSIGSTOP(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	hosts, keys, _, describe := clusterProcesses(t)
	require.NoError(t, hosts[2].cmd.Process.Signal(syscall.SIGSTOP))
	took := waitForCluster(t, hosts[0].address, "host-1", "host-2")
	t.Logf("host-3 paused: its shards owned by the others after %v", took.Round(time.Millisecond))
	require.NoError(t, hosts[2].cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool { return shardLosses(t, hosts[2].http) > 0 }, time.Minute, 50*time.Millisecond,
		"host-3 never noticed it lost its shards")
	waitForCluster(t, hosts[0].address, "host-1", "host-2", "host-3")
	// The workers whose heartbeats the paused host held, and whose shards moved twice (to the
	// others, then back), were never declared INACTIVE.
	require.Zero(t, settledResurrections(t, keys, describe), "a worker that kept heartbeating was declared INACTIVE around host-3's pause")
}
