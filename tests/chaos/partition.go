package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/bench"
	"github.com/vigilhq/vigil/chasm/worker"
	"github.com/vigilhq/vigil/tests/freeport"
)

// Partition scenarios: what breaks between the three hosts of a cluster and their database.
const (
	// ScenarioPGFreeze freezes host 1's path to PostgreSQL (its proxy stops moving bytes;
	// every socket stays open) until its shards are served by the others, then thaws it.
	ScenarioPGFreeze = "pg-freeze"
	// ScenarioPGRefuse closes host 1's path to PostgreSQL and refuses new connections until its
	// shards are served by the others, then restores it.
	ScenarioPGRefuse = "pg-refuse"
	// ScenarioRenewalsStopped stops host 1's membership loop alone (a test hook: SIGUSR1),
	// the host serving on and reaching PostgreSQL, until its shards are served by the others;
	// then resumes it (SIGUSR2).
	ScenarioRenewalsStopped = "renewals-stopped"
	// ScenarioPGRestart restarts PostgreSQL under the three hosts (a fast shutdown: every
	// connection closed, every open transaction rolled back; then a start). It runs on an
	// instance the suite starts for the run (initdb, pg_ctl), so that no other user of the
	// machine's PostgreSQL is disturbed.
	ScenarioPGRestart = "pg-restart"
	// ScenarioHistoryCut black-holes the history port between hosts 1 and 2 alone (each
	// dials the other through a proxy of the suite, a test hook, and both proxies freeze),
	// both hosts reaching PostgreSQL and host 3: nothing moves, and a call host 2 forwards to
	// host 1 must reach it through host 3.
	ScenarioHistoryCut = "history-cut"
	// ScenarioClockAhead runs host 1 with its clock hostClockOffset ahead of the others' (a
	// test hook offsetting its TimeSource) throughout, and freezes its path to PostgreSQL as
	// ScenarioPGFreeze does: the shards, and the leases recorded in them, move from a host
	// whose clock is ahead to hosts behind it, and back once host 1 is thawed.
	ScenarioClockAhead = "clock-ahead"
)

// hostClockOffset is how far ahead host 1's clock runs in ScenarioClockAhead.
const hostClockOffset = 2 * time.Second

// Scenarios are the partition scenarios PartitionRun knows, in the order the long form runs
// them.
var Scenarios = []string{ScenarioPGFreeze, ScenarioPGRefuse, ScenarioRenewalsStopped, ScenarioPGRestart, ScenarioHistoryCut, ScenarioClockAhead}

// ownsPostgres reports whether scenario runs on a PostgreSQL instance of its own rather than
// on PartitionConfig.Postgres.
func ownsPostgres(scenario string) bool { return scenario == ScenarioPGRestart }

// PartitionConfig is one partition run: a cluster of three `vigil server` processes on one
// PostgreSQL, each reaching it through a proxy of the suite, under a fleet of simulated SDK
// workers heartbeating through hosts 2 and 3 and stock-SDK workers running standalone
// activities.
type PartitionConfig struct {
	Scenario string
	// Postgres is the DSN (URL) of an existing database; the run creates a fresh one next to it.
	// A scenario that restarts PostgreSQL ignores it and starts an instance of its own.
	Postgres string
	// PGBin is the directory of initdb and pg_ctl for a scenario that owns its PostgreSQL
	// (default: the newest under /usr/lib/postgresql/*/bin).
	PGBin string
	// Fleet is the number of simulated workers heartbeating every second (default 300).
	Fleet int
	// SDKWorkers is the number of stock-SDK activity workers (default 3); one is SIGKILLed
	// when the fault begins, and replaced.
	SDKWorkers int
	// Strand bounds the wait for every acknowledged activity's result after the fault ends
	// (default 90 s).
	Strand time.Duration
	// LeaseIntervals is the lease of every worker in heartbeat intervals
	// (worker.leaseIntervalMultiplier; default 5).
	LeaseIntervals int
	Dir            string
	Bin            Binaries
	Logf           func(format string, args ...any)
}

// PartitionReport is what a partition run measured and found.
type PartitionReport struct {
	Scenario string
	// ShardsServedAfter is the time from the fault to every shard owned by a host other than
	// host 1 (as host 2 describes the cluster). When PostgreSQL restarts under every host, it
	// is the time from the restart's beginning to every simulated worker's heartbeat succeeding
	// again.
	ShardsServedAfter time.Duration
	// RejoinedAfter is the time from the end of the fault to host 1 owning shards again (for
	// a PostgreSQL restart: from PostgreSQL accepting connections again to every simulated
	// worker's heartbeat succeeding).
	RejoinedAfter time.Duration
	// FleetHeartbeats and FleetErrors count the fleet's heartbeat calls from the fault to the
	// end of the run, and those that failed (after the retries an SDK makes), by code.
	FleetHeartbeats int64
	FleetErrors     map[string]int64
	// Activities acknowledged and completed with their own result.
	Acknowledged, Completed int
	// FencedCommits counts the task rows the store's fencing check saw committed.
	FencedCommits int64
	// HistoryOps counts the operations (acknowledged heartbeats, liveness reads) of the
	// simulated workers' histories checked for linearizability.
	HistoryOps int
	// FailedOver counts, by outcome (resent, unavailable), the calls hosts 2 and 3 took back
	// from a shard owner that stopped answering (their logs say so).
	FailedOver map[string]int64
	// Relayed counts, by outcome (answered, failed), the calls any host relayed through another
	// to an owner it could not reach while that owner renewed (their logs say so).
	Relayed map[string]int64
	// ShortestLease is the shortest lease the listings showed for an ACTIVE simulated worker
	// while the fleet ran (ShortestLeaseOf says which and when): every beat is a second apart,
	// so a lease of about a second would expire between two of them.
	ShortestLease   time.Duration
	ShortestLeaseOf string
	Checks          []string
	Violations      []string
	Elapsed         time.Duration
}

// OK reports whether every invariant held.
func (r *PartitionReport) OK() bool { return len(r.Violations) == 0 }

// FleetErrorCount is the fleet's failed heartbeat calls in all.
func (r *PartitionReport) FleetErrorCount() int64 {
	var n int64
	for _, v := range r.FleetErrors {
		n += v
	}
	return n
}

func (r *PartitionReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s, %v\n", r.Scenario, r.Elapsed.Round(time.Second))
	switch {
	case r.Scenario == ScenarioHistoryCut:
		fmt.Fprintf(&b, "  every simulated worker's heartbeat sent after the cut succeeded %v after it\n", r.ShardsServedAfter.Round(time.Millisecond))
	case ownsPostgres(r.Scenario):
		fmt.Fprintf(&b, "  every simulated worker's heartbeat succeeded again %v after the restart began, %v after PostgreSQL accepted connections again\n",
			r.ShardsServedAfter.Round(time.Millisecond), r.RejoinedAfter.Round(time.Millisecond))
	default:
		fmt.Fprintf(&b, "  every shard served by hosts 2 and 3 %v after the fault; host 1 owned shards again %v after it ended\n",
			r.ShardsServedAfter.Round(time.Millisecond), r.RejoinedAfter.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "  fleet heartbeats from the fault on %d, failed %d %v\n", r.FleetHeartbeats, r.FleetErrorCount(), r.FleetErrors)
	fmt.Fprintf(&b, "  calls taken back from a stalled owner by hosts 2 and 3: %v; relayed through another host: %v\n", r.FailedOver, r.Relayed)
	if r.ShortestLease > 0 {
		fmt.Fprintf(&b, "  shortest lease listed for an ACTIVE simulated worker while the fleet ran: %v (%s)\n", r.ShortestLease, r.ShortestLeaseOf)
	}
	fmt.Fprintf(&b, "  activities acknowledged %d, completed with their own result %d; task rows checked by the fence %d\n",
		r.Acknowledged, r.Completed, r.FencedCommits)
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "  check: %s\n", c)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  VIOLATION: %s\n", v)
	}
	return b.String()
}

// clusterHost is one `vigil server` process of the cluster and its path to PostgreSQL.
type clusterHost struct {
	id    string
	proc  *serverProc
	proxy *tcpProxy
	// peer is the proxy through which this host dials the other end of the history pair a
	// ScenarioHistoryCut cuts (nil on other hosts and in other scenarios).
	peer *tcpProxy
}

type partitionRun struct {
	cfg    PartitionConfig
	report *PartitionReport
	hosts  []*clusterHost
	dsn    string
	pg     *pgInstance // the run's own PostgreSQL, when the scenario restarts it

	raw     []workflowservice.WorkflowServiceClient
	sdk     client.Client
	workers []*workerProc

	mu         sync.Mutex
	killed     map[string]bool // SDK worker identities killed on purpose
	acts       map[string]*act
	nextAct    int
	violations []string
	badWorkers map[string]bool

	faultAt atomic.Int64 // unix nanos; 0 before the fault
	// mendedAt is when the fault ended (unix nanos; 0 before), and recovered the simulated
	// workers whose heartbeat sent after it succeeded.
	mendedAt atomic.Int64
	// fleetStopping is when the simulated fleet began to stop (unix nanos; 0 before): its
	// clients close their connections without ShutdownWorker, as a killed process does, and
	// from then on its workers are dead, and found so (CONNECTION_LOST once their connections
	// closed, or by their leases), while the monitor still lists them.
	fleetStopping atomic.Int64
	// shortestLease is the shortest lease listed for an ACTIVE simulated worker while the
	// fleet ran, with the worker and when (under mu).
	shortestLease   time.Duration
	shortestLeaseOf string
	// history is every simulated worker's heartbeats and liveness reads, client side, for
	// the linearizability check.
	history    leaseHistory
	recovered  sync.Map // worker instance key → struct{}
	nRecovered atomic.Int64
	fleetCalls atomic.Int64
	fleetErrs  sync.Map // code → *atomic.Int64
}

func (p *partitionRun) logf(format string, args ...any) {
	if p.cfg.Logf != nil {
		p.cfg.Logf(format, args...)
	}
}

func (p *partitionRun) violate(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.violations = append(p.violations, fmt.Sprintf(format, args...))
}

// PartitionRun runs one scenario and checks, after it: no live worker was ever listed
// INACTIVE; every simulated worker's latest heartbeat is held; every acknowledged activity
// (those of the worker killed at the fault included) completed with its own result; the
// store's fencing check refused no commit of a host that no longer held its shard; and it
// counts the fleet's errors. An error means the run could not be carried out.
func PartitionRun(ctx context.Context, cfg PartitionConfig) (*PartitionReport, error) {
	if cfg.Fleet == 0 {
		cfg.Fleet = 300
	}
	if cfg.SDKWorkers == 0 {
		cfg.SDKWorkers = 3
	}
	if cfg.Strand == 0 {
		cfg.Strand = 90 * time.Second
	}
	began := time.Now()
	p := &partitionRun{cfg: cfg, report: &PartitionReport{Scenario: cfg.Scenario, FleetErrors: map[string]int64{}, FailedOver: map[string]int64{}, Relayed: map[string]int64{}},
		killed: map[string]bool{}, acts: map[string]*act{}, badWorkers: map[string]bool{}}
	defer func() { p.report.Elapsed = time.Since(began) }()
	switch cfg.Scenario {
	case ScenarioPGFreeze, ScenarioPGRefuse, ScenarioRenewalsStopped, ScenarioPGRestart, ScenarioHistoryCut, ScenarioClockAhead:
	default:
		return nil, fmt.Errorf("unknown scenario %q (known: %s)", cfg.Scenario, strings.Join(Scenarios, ", "))
	}

	admin := cfg.Postgres
	if ownsPostgres(cfg.Scenario) {
		pg, err := startPGInstance(ctx, cfg.PGBin, filepath.Join(cfg.Dir, "postgres"))
		if err != nil {
			return nil, err
		}
		defer pg.stop()
		p.pg, admin = pg, pg.DSN()
	}
	dsn, drop, err := createDatabase(ctx, admin, fmt.Sprintf("vigil_partition_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6))
	if err != nil {
		return nil, err
	}
	defer drop()
	p.dsn = dsn
	if err := p.startCluster(ctx); err != nil {
		return nil, err
	}
	defer p.stopCluster()
	if err := p.installFenceCheck(ctx); err != nil {
		return nil, err
	}
	if _, err := p.waitForOwners(ctx, time.Minute, "host-1", "host-2", "host-3"); err != nil {
		return nil, err
	}
	if err := p.startClients(ctx); err != nil {
		return nil, err
	}
	defer p.closeClients()

	monitorCtx, cancelMonitor := context.WithCancel(ctx)
	monitorDone := make(chan struct{})
	go func() { defer close(monitorDone); p.monitorLiveness(monitorCtx) }()
	stopMonitor := sync.OnceFunc(func() { cancelMonitor(); <-monitorDone })
	defer stopMonitor()

	fleetCtx, cancelFleet := context.WithCancel(ctx)
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- p.runFleet(fleetCtx) }()
	stopFleet := sync.OnceValue(func() error { cancelFleet(); return <-fleetDone })
	defer stopFleet()

	loadCtx, stopLoad := context.WithCancel(ctx)
	var loadWG sync.WaitGroup
	loadWG.Go(func() { p.startActivities(loadCtx) })

	// The fleet is registered and heartbeats at its pace: every worker listed ACTIVE.
	if err := p.waitForFleet(ctx, 2*time.Minute); err != nil {
		stopLoad()
		loadWG.Wait()
		return p.report, err
	}
	faultErr := p.fault(ctx)
	stopLoad()
	loadWG.Wait()
	if faultErr != nil {
		return p.report, faultErr
	}
	// Two more rounds of the fleet's heartbeats on the mended cluster, then its last beats are
	// checked.
	if err := p.waitForFleetCalls(ctx, p.fleetCalls.Load()+int64(2*p.cfg.Fleet), time.Minute); err != nil {
		return p.report, err
	}
	fleetStop := time.Now()
	p.fleetStopping.Store(fleetStop.UnixNano())
	if err := stopFleet(); err != nil && !errors.Is(err, context.Canceled) {
		p.violate("the fleet stopped: %v", err)
	}
	p.checkFleetHeld(ctx, fleetStop)
	p.awaitResults(ctx)
	stopMonitor()
	p.checkLinearizable()
	p.checkFence(ctx)
	p.checkActivities()
	for _, h := range p.hosts[1:] {
		p.countTakenBack(h)
	}
	for _, h := range p.hosts {
		p.countRelayed(h)
	}
	p.fleetErrs.Range(func(k, v any) bool {
		p.report.FleetErrors[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	p.report.FleetHeartbeats = p.fleetCalls.Load()
	p.mu.Lock()
	p.report.ShortestLease, p.report.ShortestLeaseOf = p.shortestLease, p.shortestLeaseOf
	p.mu.Unlock()
	p.report.Checks = append(p.report.Checks,
		"no live worker (simulated or SDK) was listed INACTIVE or resurrected",
		"every simulated worker's last acknowledged heartbeat is held by the server",
		"every acknowledged activity completed with its own result, those of the worker killed at the fault included",
		"every task row committed carried its shard's stored range_id (no commit by a fenced owner)",
		fmt.Sprintf("every simulated worker's history of heartbeats and liveness reads (%d operations) is linearizable against the lease model", p.report.HistoryOps))
	p.mu.Lock()
	p.report.Violations = append(p.report.Violations, p.violations...)
	p.mu.Unlock()
	return p.report, nil
}

// startCluster starts host 1 (which creates the schema), then hosts 2 and 3, each reaching
// PostgreSQL through its own proxy.
func (p *partitionRun) startCluster(ctx context.Context) error {
	u, err := url.Parse(p.dsn)
	if err != nil {
		return err
	}
	upstream := u.Host
	if !strings.Contains(upstream, ":") {
		upstream += ":5432"
	}
	var history [3]string
	for i := range history {
		port, err := freeport.Port()
		if err != nil {
			return err
		}
		history[i] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	// In ScenarioHistoryCut hosts 1 and 2 dial each other through proxies of their own.
	var peers [3]*tcpProxy
	if p.cfg.Scenario == ScenarioHistoryCut {
		for i, other := range []int{1, 0} {
			if peers[i], err = newTCPProxy(history[other]); err != nil {
				return err
			}
		}
	}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("host-%d", i)
		proxy, err := newTCPProxy(upstream)
		if err != nil {
			return err
		}
		via := *u
		via.Host = proxy.Addr()
		dir := filepath.Join(p.cfg.Dir, id)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		config := filepath.Join(dir, "server.yaml")
		yaml := fmt.Sprintf("persistence:\n  driver: postgres\n  postgres:\n    dsn: %q\ncluster:\n  hostID: %s\nhistoryServer:\n  address: %q\n",
			via.String(), id, history[i-1])
		if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
			return err
		}
		proc, err := newServerProc(p.cfg.Bin.Vigil, dir, []string{"--config", config}, []string{
			`worker.defaultLeaseDuration="5s"`,
			fmt.Sprintf("worker.leaseIntervalMultiplier=%d", cmp.Or(p.cfg.LeaseIntervals, 5)),
			`history.leaseExpiryGraceAfterRestart="10s"`,
		})
		if err != nil {
			return err
		}
		var hooks []string
		if i == 1 {
			hooks = append(hooks, "renewal-signals")
			if p.cfg.Scenario == ScenarioClockAhead {
				hooks = append(hooks, "clock-offset="+hostClockOffset.String())
			}
		}
		if peer := peers[i-1]; peer != nil {
			hooks = append(hooks, fmt.Sprintf("history-via=%s>%s", history[2-i], peer.Addr()))
		}
		if len(hooks) > 0 {
			proc.env = []string{"VIGIL_TEST_HOOKS=" + strings.Join(hooks, ",")}
		}
		h := &clusterHost{id: id, proc: proc, proxy: proxy, peer: peers[i-1]}
		p.hosts = append(p.hosts, h)
		if err := proc.start(); err != nil {
			return err
		}
		if i == 1 { // the schema is in place before the others start
			if err := proc.waitReady(ctx, 2*time.Minute); err != nil {
				return err
			}
			if err := p.checkHooks(proc); err != nil {
				return err
			}
		}
	}
	for _, h := range p.hosts[1:] {
		if err := h.proc.waitReady(ctx, 2*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// checkHooks fails if the scenario needs a test hook that host 1 did not enable: a binary
// built without TestHooksTag (a production build, given with -vigil) has none, and the
// scenario would test nothing.
func (p *partitionRun) checkHooks(host1 *serverProc) error {
	var want []string
	switch p.cfg.Scenario {
	case ScenarioRenewalsStopped, ScenarioHistoryCut:
		// Host 1 logs the renewal hook in every scenario: a binary that did proves the tag.
		want = append(want, "test hook enabled: SIGUSR1 pauses")
	case ScenarioClockAhead:
		want = append(want, "test hook enabled: this host's clock is offset")
	}
	data, err := os.ReadFile(host1.logPath)
	if err != nil {
		return err
	}
	for _, w := range want {
		if !strings.Contains(string(data), w) {
			return fmt.Errorf("scenario %s needs a vigil built with -tags %s: host 1 did not log %q", p.cfg.Scenario, TestHooksTag, w)
		}
	}
	return nil
}

func (p *partitionRun) stopCluster() {
	for _, h := range p.hosts {
		h.proxy.thaw()
		if h.peer != nil {
			h.peer.thaw()
		}
		h.proc.kill()
		_ = h.proc.conn.Close()
		h.proxy.close()
		if h.peer != nil {
			h.peer.close()
		}
	}
}

// installFenceCheck makes the database itself check every task row committed: its task ID
// carries the range_id its writer held the shard with (range_id << 32 | sequence), which must
// be the shard's stored range_id in the same transaction. A row that is not is recorded.
func (p *partitionRun) installFenceCheck(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
CREATE TABLE partition_fence_violations (shard_id INTEGER, task_range BIGINT, stored_range BIGINT, at TIMESTAMPTZ DEFAULT clock_timestamp());
CREATE SEQUENCE partition_fence_checked;
CREATE FUNCTION partition_fence_check() RETURNS trigger AS $$
BEGIN
  PERFORM nextval('partition_fence_checked');
  INSERT INTO partition_fence_violations (shard_id, task_range, stored_range)
    SELECT NEW.shard_id, NEW.task_id >> 32, s.range_id FROM shards s
    WHERE s.shard_id = NEW.shard_id AND s.range_id <> NEW.task_id >> 32;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER partition_fence_timer AFTER INSERT ON timer_tasks FOR EACH ROW EXECUTE FUNCTION partition_fence_check();
CREATE TRIGGER partition_fence_outbound AFTER INSERT ON outbound_tasks FOR EACH ROW EXECUTE FUNCTION partition_fence_check();
`)
	return err
}

// checkLinearizable checks every simulated worker's history against the lease model
// (linearizability.go). Its shortest lease is the lower of the first heartbeat's (the
// default, 5 s) and LeaseIntervals beats of the fleet's 1 s interval, less a tenth for the
// jitter of the interval a heartbeat reports.
func (p *partitionRun) checkLinearizable() {
	minLease := min(5*time.Second, time.Duration(cmp.Or(p.cfg.LeaseIntervals, 5))*time.Second) * 9 / 10
	if p.cfg.Scenario == ScenarioClockAhead {
		// Host 1 judges the leases of its shards on a clock that far ahead of the suite's.
		minLease -= hostClockOffset
	}
	ops, bad := p.history.check(minLease, snapshotLag, time.Minute)
	p.report.HistoryOps = ops
	for _, b := range bad {
		p.violate("%s", b)
	}
	if ops == 0 {
		p.violate("no history was recorded: the linearizability check checked nothing")
	}
}

func (p *partitionRun) checkFence(ctx context.Context) {
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		p.violate("read the fencing record: %v", err)
		return
	}
	defer conn.Close(ctx)
	var checked int64
	if err := conn.QueryRow(ctx, `SELECT last_value FROM partition_fence_checked`).Scan(&checked); err != nil {
		p.violate("read the fencing record: %v", err)
		return
	}
	p.report.FencedCommits = checked
	rows, err := conn.Query(ctx, `SELECT shard_id, task_range, stored_range, at FROM partition_fence_violations ORDER BY at`)
	if err != nil {
		p.violate("read the fencing record: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var shard int32
		var taskRange, storedRange int64
		var at time.Time
		if err := rows.Scan(&shard, &taskRange, &storedRange, &at); err != nil {
			p.violate("read the fencing record: %v", err)
			return
		}
		p.violate("shard %d: a task row of range_id %d committed at %s while the stored range_id was %d (two owners committing)",
			shard, taskRange, at.UTC().Format(time.RFC3339Nano), storedRange)
	}
	if checked == 0 {
		p.violate("the fencing check saw no commit: it checked nothing")
	}
}

// describe asks host (0-based) to describe the cluster.
func (p *partitionRun) describe(ctx context.Context, host int) (*livenesspb.DescribeClusterResponse, error) {
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return p.hosts[host].proc.liveness.DescribeCluster(callCtx, &livenesspb.DescribeClusterRequest{})
}

// waitForOwners waits until host 2 describes exactly ids as the members, owning every shard.
func (p *partitionRun) waitForOwners(ctx context.Context, within time.Duration, ids ...string) (time.Duration, error) {
	start := time.Now()
	var last string
	for {
		resp, err := p.describe(ctx, 1)
		if err == nil {
			var got []string
			owned := int32(0)
			for _, h := range resp.GetHosts() {
				got = append(got, h.GetHostId())
				owned += int32(len(h.GetShards()))
			}
			last = fmt.Sprintf("hosts %v, %d of %d shards owned, unowned %v", got, owned, resp.GetNumShards(), resp.GetUnownedShards())
			if strings.Join(got, ",") == strings.Join(ids, ",") && owned == resp.GetNumShards() && len(resp.GetUnownedShards()) == 0 {
				return time.Since(start), nil
			}
		} else {
			last = err.Error()
		}
		if time.Since(start) > within {
			return 0, fmt.Errorf("the cluster never settled on %v within %v: %s", ids, within, last)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// startClients starts the SDK workers (on hosts 2 and 3 in turn), the raw start clients and
// the SDK client that fetches results.
func (p *partitionRun) startClients(ctx context.Context) error {
	for _, h := range p.hosts[1:] {
		cc, err := grpc.NewClient(h.proc.address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		p.raw = append(p.raw, workflowservice.NewWorkflowServiceClient(cc))
	}
	var err error
	p.sdk, err = client.Dial(client.Options{HostPort: p.hosts[2].proc.address(), Identity: "partition-client", Logger: quietLogger{}})
	if err != nil {
		return err
	}
	for i := range p.cfg.SDKWorkers {
		if err := p.addWorker(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (p *partitionRun) addWorker(ctx context.Context, i int) error {
	name := fmt.Sprintf("chaos-w%d", len(p.workers)+1)
	w, err := startWorker(ctx, p.cfg.Bin.Worker, p.hosts[1+i%2].proc.address(), "chaos", name, p.cfg.Dir)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.workers = append(p.workers, w)
	p.mu.Unlock()
	return nil
}

func (p *partitionRun) closeClients() {
	if p.sdk != nil {
		p.sdk.Close()
	}
	p.mu.Lock()
	workers := append([]*workerProc(nil), p.workers...)
	p.mu.Unlock()
	for _, w := range workers {
		w.kill()
	}
}

// runFleet runs the simulated SDK fleet through hosts 2 and 3 until ctx ends, counting every
// heartbeat call from the fault on and its errors (an SDK's retries of Unavailable and
// ResourceExhausted included).
func (p *partitionRun) runFleet(ctx context.Context) error {
	_, err := bench.Run(ctx, bench.Config{
		Address:                p.hosts[1].proc.address() + "," + p.hosts[2].proc.address(),
		Workers:                p.cfg.Fleet,
		Interval:               time.Second,
		Duration:               time.Hour, // until ctx ends
		RetryUnavailable:       true,
		RetryResourceExhausted: true,
		ObserveWorkers: func(keys []string, sent time.Time, took time.Duration, err error) {
			if err == nil {
				p.history.heartbeat(keys, sent, took)
			}
			if at := p.mendedAt.Load(); err != nil || at == 0 || sent.UnixNano() < at {
				return
			}
			for _, k := range keys {
				if _, loaded := p.recovered.LoadOrStore(k, struct{}{}); !loaded {
					p.nRecovered.Add(1)
				}
			}
		},
		Observe: func(sent time.Time, _ time.Duration, _ int, err error) {
			at := p.faultAt.Load()
			if at == 0 || sent.UnixNano() < at || ctx.Err() != nil {
				return
			}
			p.fleetCalls.Add(1)
			if err != nil {
				code := status.Code(err).String()
				v, _ := p.fleetErrs.LoadOrStore(code, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
			}
		},
	}, io.Discard)
	return err
}

// waitForFleetCalls waits until the fleet has made n heartbeat calls since the fault.
func (p *partitionRun) waitForFleetCalls(ctx context.Context, n int64, within time.Duration) error {
	deadline := time.Now().Add(within)
	for p.fleetCalls.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("the fleet made %d heartbeat calls, not %d, within %v", p.fleetCalls.Load(), n, within)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// listWorkers lists every worker through host 2; ok is false if a page failed.
func (p *partitionRun) listWorkers(ctx context.Context) (workers []*livenesspb.WorkerLiveness, ok bool) {
	var token []byte
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := p.hosts[1].proc.liveness.ListWorkerLiveness(callCtx, &livenesspb.ListWorkerLivenessRequest{
			Namespace: "default", PageSize: 1000, NextPageToken: token,
		})
		cancel()
		if err != nil {
			return workers, false
		}
		workers = append(workers, resp.GetWorkers()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return workers, true
		}
	}
}

// waitForFleet waits until the fleet and the SDK workers are all listed ACTIVE.
func (p *partitionRun) waitForFleet(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	want := p.cfg.Fleet + p.cfg.SDKWorkers
	for {
		workers, ok := p.listWorkers(ctx)
		active := 0
		for _, w := range workers {
			if w.GetState() == livenesspb.LivenessState_LIVENESS_STATE_ACTIVE {
				active++
			}
		}
		if ok && active >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the fleet never registered: %d of %d workers ACTIVE after %v", active, want, within)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// monitorLiveness lists the workers every 250 ms and records every live one shown INACTIVE
// or with a resurrection (INACTIVE between two listings).
func (p *partitionRun) monitorLiveness(ctx context.Context) {
	for ctx.Err() == nil {
		invoked := time.Now()
		workers, complete := p.listWorkers(ctx)
		returned := time.Now()
		stopping := p.fleetStopping.Load()
		for _, w := range workers {
			identity := w.GetLastHeartbeat().GetWorkerIdentity()
			key := w.GetLastHeartbeat().GetWorkerInstanceKey()
			inactive := w.GetState() == livenesspb.LivenessState_LIVENESS_STATE_INACTIVE
			simulated := !strings.HasPrefix(identity, "chaos-w")
			if simulated && stopping != 0 && (!inactive || !w.GetInactiveTime().AsTime().Before(time.Unix(0, stopping).Add(-clockTolerance))) {
				// The fleet is stopping: its workers are dead from now on, and a worker found
				// dead now is no live worker declared INACTIVE. The lease model knows nothing
				// of connections closing: the listing still goes into the history for what it
				// shows of the last heartbeat (none acknowledged may be lost), not for its state.
				if complete {
					p.history.read(key, invoked, returned, false, w.GetLastHeartbeatTime().AsTime())
				}
				continue
			}
			if complete && simulated {
				p.history.read(key, invoked, returned, inactive, w.GetLastHeartbeatTime().AsTime())
			}
			p.mu.Lock()
			if lease := w.GetLeaseDuration().AsDuration(); simulated && !inactive && stopping == 0 && lease > 0 &&
				(p.shortestLease == 0 || lease < p.shortestLease) {
				p.shortestLease = lease
				p.shortestLeaseOf = fmt.Sprintf("worker %s, listed %s", key, invoked.UTC().Format("15:04:05.000"))
			}
			if (inactive || w.GetResurrectionCount() > 0) && !p.killed[identity] && !p.badWorkers[key] {
				p.badWorkers[key] = true
				p.violations = append(p.violations, fmt.Sprintf("live worker %s (%s) was declared INACTIVE (listed %s, reason %s, resurrections %d; last heartbeat %s, lease deadline %s) at %s",
					key, identity, w.GetState(), w.GetInactiveReason(), w.GetResurrectionCount(),
					w.GetLastHeartbeatTime().AsTime().UTC().Format("15:04:05.000"), w.GetLeaseDeadline().AsTime().UTC().Format("15:04:05.000"),
					time.Now().UTC().Format(time.RFC3339Nano)))
			}
			p.mu.Unlock()
		}
		_ = sleep(ctx, 250*time.Millisecond)
	}
}

// snapshotLag is how much older than the last acknowledged heartbeat a listing may show a
// worker's last heartbeat: the hosts run with the default worker.heartbeatWriteInterval, and
// a listing reads the store, which has at least the heartbeat written last.
const snapshotLag = worker.HeartbeatWriteIntervalDefault

// checkFleetHeld checks that every simulated worker's last acknowledged heartbeat is what the
// server holds: the last heartbeat time listed after the fleet stopped is no older than the
// invocation of the last heartbeat the fleet saw acknowledged (the server applied it at or
// after that), less snapshotLag. A worker whose last beats were still waiting when the fleet
// stopped (a host behind queues them) has nothing more to hold.
func (p *partitionRun) checkFleetHeld(ctx context.Context, stoppedAt time.Time) {
	workers, ok := p.listWorkers(ctx)
	if !ok {
		p.violate("the final listing of the workers failed")
		return
	}
	acked := p.history.lastAcknowledged()
	fleet := 0
	for _, w := range workers {
		if strings.HasPrefix(w.GetLastHeartbeat().GetWorkerIdentity(), "chaos-w") {
			continue
		}
		fleet++
		key := w.GetLastHeartbeat().GetWorkerInstanceKey()
		last := w.GetLastHeartbeatTime().AsTime()
		if want, ok := acked[key]; ok && last.Before(want.Add(-snapshotLag-clockTolerance)) {
			p.violate("worker %s: the server holds a heartbeat of %s, but one sent at %s was acknowledged (%v before the fleet stopped): it is lost",
				key, last.UTC().Format(time.RFC3339Nano), want.UTC().Format(time.RFC3339Nano), stoppedAt.Sub(want).Round(time.Millisecond))
		}
	}
	if fleet != p.cfg.Fleet {
		p.violate("the server lists %d simulated workers, the fleet had %d", fleet, p.cfg.Fleet)
	}
}

// fault breaks host 1's path to PostgreSQL, kills an SDK worker, waits until hosts 2 and 3
// serve every shard and the killed worker is INACTIVE, then mends the path and waits until
// host 1 owns shards again.
func (p *partitionRun) fault(ctx context.Context) error {
	switch p.cfg.Scenario {
	case ScenarioPGRestart:
		return p.restartPostgres(ctx)
	case ScenarioHistoryCut:
		return p.cutHistoryPair(ctx)
	}
	h := p.hosts[0]
	p.faultAt.Store(time.Now().UnixNano())
	start := time.Now()
	switch p.cfg.Scenario {
	case ScenarioPGFreeze, ScenarioClockAhead:
		h.proxy.freeze()
	case ScenarioPGRefuse:
		h.proxy.refuse()
	case ScenarioRenewalsStopped:
		if err := h.proc.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			return err
		}
	}
	p.logf("partition: %s on host-1", p.cfg.Scenario)
	victim, replaced := p.killWorker(ctx)
	if _, err := p.waitForOwners(ctx, time.Minute, "host-2", "host-3"); err != nil {
		return err
	}
	p.report.ShardsServedAfter = time.Since(start)
	p.logf("partition: every shard served by hosts 2 and 3 after %v", p.report.ShardsServedAfter.Round(time.Millisecond))
	if err := <-replaced; err != nil {
		return err
	}
	// The killed worker is found dead, and the fleet makes two more rounds of heartbeats,
	// while host 1 is still cut off.
	if err := p.waitInactive(ctx, victim.name, 2*time.Minute); err != nil {
		return err
	}
	if err := p.waitForFleetCalls(ctx, p.fleetCalls.Load()+int64(2*p.cfg.Fleet), time.Minute); err != nil {
		return err
	}
	mended := time.Now()
	p.mendedAt.Store(mended.UnixNano())
	switch p.cfg.Scenario {
	case ScenarioPGFreeze, ScenarioClockAhead:
		h.proxy.thaw()
	case ScenarioPGRefuse:
		if err := h.proxy.restore(); err != nil {
			return err
		}
	case ScenarioRenewalsStopped:
		if err := h.proc.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			return err
		}
	}
	if _, err := p.waitForOwners(ctx, 2*time.Minute, "host-1", "host-2", "host-3"); err != nil {
		return err
	}
	p.report.RejoinedAfter = time.Since(mended)
	p.logf("partition: host-1 owns shards again %v after its path was mended", p.report.RejoinedAfter.Round(time.Millisecond))
	return nil
}

// restartPostgres restarts the run's PostgreSQL under the three hosts and kills an SDK
// worker, then waits until every simulated worker's heartbeat succeeds again, the cluster has
// settled on the three hosts owning every shard, and the killed worker is INACTIVE.
func (p *partitionRun) restartPostgres(ctx context.Context) error {
	p.faultAt.Store(time.Now().UnixNano())
	start := time.Now()
	victim, replaced := p.killWorker(ctx)
	p.logf("partition: restarting PostgreSQL under the three hosts")
	if err := p.pg.restart(ctx); err != nil {
		return err
	}
	mended := time.Now()
	p.mendedAt.Store(mended.UnixNano())
	p.logf("partition: PostgreSQL accepts connections again after %v", mended.Sub(start).Round(time.Millisecond))
	if err := p.waitFleetRecovered(ctx, 2*time.Minute); err != nil {
		return err
	}
	p.report.ShardsServedAfter, p.report.RejoinedAfter = time.Since(start), time.Since(mended)
	p.logf("partition: every simulated worker's heartbeat succeeded again %v after the restart began", p.report.ShardsServedAfter.Round(time.Millisecond))
	if _, err := p.waitForOwners(ctx, 2*time.Minute, "host-1", "host-2", "host-3"); err != nil {
		return err
	}
	if err := <-replaced; err != nil {
		return err
	}
	return p.waitInactive(ctx, victim.name, 2*time.Minute)
}

// cutHistoryPair black-holes the history connections between hosts 1 and 2 and kills an SDK
// worker; it waits until every simulated worker had a heartbeat sent after the cut succeed,
// the killed worker is INACTIVE and the fleet made two more rounds of heartbeats, then mends
// the pair. The membership must not change: every host renews and reaches PostgreSQL.
func (p *partitionRun) cutHistoryPair(ctx context.Context) error {
	start := time.Now()
	p.faultAt.Store(start.UnixNano())
	p.mendedAt.Store(start.UnixNano()) // recovery counts from the cut itself
	for _, h := range p.hosts[:2] {
		h.peer.freeze()
	}
	p.logf("partition: history port cut between host-1 and host-2")
	victim, replaced := p.killWorker(ctx)
	if err := p.waitFleetRecovered(ctx, 2*time.Minute); err != nil {
		return err
	}
	p.report.ShardsServedAfter = time.Since(start)
	p.logf("partition: every simulated worker's heartbeat sent after the cut succeeded %v after it", p.report.ShardsServedAfter.Round(time.Millisecond))
	if err := <-replaced; err != nil {
		return err
	}
	if err := p.waitInactive(ctx, victim.name, 2*time.Minute); err != nil {
		return err
	}
	if err := p.waitForFleetCalls(ctx, p.fleetCalls.Load()+int64(2*p.cfg.Fleet), time.Minute); err != nil {
		return err
	}
	// Nothing moved: the three hosts kept every shard throughout.
	if _, err := p.waitForOwners(ctx, time.Second, "host-1", "host-2", "host-3"); err != nil {
		p.violate("the membership changed while only the history pair was cut: %v", err)
	}
	for _, h := range p.hosts[:2] {
		h.peer.thaw()
	}
	return nil
}

// killWorker SIGKILLs the first SDK worker, on purpose (it may be listed INACTIVE), and
// starts its replacement; replaced reports the replacement's start.
func (p *partitionRun) killWorker(ctx context.Context) (victim *workerProc, replaced <-chan error) {
	victim = p.workers[0]
	p.mu.Lock()
	p.killed[victim.name] = true
	p.mu.Unlock()
	victim.kill()
	started := make(chan error, 1)
	go func() { started <- p.addWorker(ctx, 0) }()
	return victim, started
}

// waitFleetRecovered waits until every simulated worker had a heartbeat sent after the fault
// ended succeed.
func (p *partitionRun) waitFleetRecovered(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for p.nRecovered.Load() < int64(p.cfg.Fleet) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d simulated workers had a heartbeat succeed within %v of the fault's end", p.nRecovered.Load(), p.cfg.Fleet, within)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func (p *partitionRun) waitInactive(ctx context.Context, identity string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		workers, _ := p.listWorkers(ctx)
		for _, w := range workers {
			if w.GetLastHeartbeat().GetWorkerIdentity() == identity && w.GetState() == livenesspb.LivenessState_LIVENESS_STATE_INACTIVE {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the killed worker %s was not INACTIVE after %v", identity, within)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// startActivities starts an activity every 200 ms through hosts 2 and 3 in turn, each
// retried (same ID, USE_EXISTING) until acknowledged, until ctx ends.
func (p *partitionRun) startActivities(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		wg.Go(func() { p.startActivity(ctx) })
	}
}

func (p *partitionRun) startActivity(ctx context.Context) {
	p.mu.Lock()
	p.nextAct++
	n := p.nextAct
	p.mu.Unlock()
	in := Input{ID: fmt.Sprintf("part-%s-%d", p.cfg.Scenario, n), Nonce: fmt.Sprintf("%x", time.Now().UnixNano()), HoldMs: (n * 97) % 1500}
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(in)
	if err != nil {
		p.violate("encode input: %v", err)
		return
	}
	req := &workflowservice.StartActivityExecutionRequest{
		Namespace: "default", Identity: "partition-client", RequestId: in.ID, ActivityId: in.ID,
		ActivityType: &commonpb.ActivityType{Name: "chaos"}, TaskQueue: &taskqueuepb.TaskQueue{Name: "chaos"},
		StartToCloseTimeout: durationpb.New(10 * time.Minute), Input: payloads,
		IdConflictPolicy: enumspb.ACTIVITY_ID_CONFLICT_POLICY_USE_EXISTING,
	}
	for attempt := 0; ; attempt++ {
		callCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := p.raw[(n+attempt)%len(p.raw)].StartActivityExecution(callCtx, req)
		cancel()
		if err == nil {
			p.mu.Lock()
			p.acts[in.ID] = &act{in: in, runID: resp.GetRunId(), ackAt: time.Now()}
			p.mu.Unlock()
			return
		}
		if ctx.Err() != nil {
			return // not acknowledged: owed nothing
		}
		_ = sleep(ctx, 100*time.Millisecond)
	}
}

// awaitResults fetches every acknowledged activity's result, up to Strand.
func (p *partitionRun) awaitResults(ctx context.Context) {
	resultsCtx, cancel := context.WithTimeout(ctx, p.cfg.Strand)
	defer cancel()
	p.mu.Lock()
	acts := make([]*act, 0, len(p.acts))
	for _, a := range p.acts {
		acts = append(acts, a)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range acts {
		wg.Go(func() {
			h := p.sdk.GetActivityHandle(client.GetActivityHandleOptions{ActivityID: a.in.ID, RunID: a.runID})
			for resultsCtx.Err() == nil {
				var out string
				err := h.Get(resultsCtx, &out)
				if err == nil || terminal(err) {
					p.mu.Lock()
					a.finished, a.result, a.err, a.doneAt = true, out, err, time.Now()
					p.mu.Unlock()
					return
				}
				_ = sleep(resultsCtx, 200*time.Millisecond)
			}
		})
	}
	wg.Wait()
}

func (p *partitionRun) checkActivities() {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.acts))
	for id := range p.acts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	p.report.Acknowledged = len(ids)
	for _, id := range ids {
		a := p.acts[id]
		switch {
		case !a.finished:
			p.violations = append(p.violations, fmt.Sprintf("activity %s (acknowledged %s) has no result after %v",
				id, a.ackAt.UTC().Format(time.RFC3339Nano), p.cfg.Strand))
		case a.err != nil:
			p.violations = append(p.violations, fmt.Sprintf("activity %s ended with an error: %v", id, a.err))
		case !strings.HasPrefix(a.result, Result(a.in.ID, a.in.Nonce, "")):
			p.violations = append(p.violations, fmt.Sprintf("activity %s returned %q, not its own result", id, a.result))
		default:
			p.report.Completed++
		}
	}
	if p.report.Acknowledged == 0 {
		p.violations = append(p.violations, "no activity was acknowledged: the run tested nothing")
	}
}

// takenBack matches a host's log line for a call it took back from an owner that stopped
// answering (history/routing.go), and its outcome.
var takenBack = regexp.MustCompile(`"msg":"took a call back from a shard owner that stopped answering".*"outcome":"(\w+)"`)

// relayed matches a host's log line for a call it relayed through another host
// (history/relay.go), and its outcome.
var relayed = regexp.MustCompile(`"msg":"relayed a call through another host[^"]*".*"outcome":"(\w+)"`)

// countRelayed adds the calls h relayed, by outcome, to the report.
func (p *partitionRun) countRelayed(h *clusterHost) {
	data, err := os.ReadFile(h.proc.logPath)
	if err != nil {
		return
	}
	for _, m := range relayed.FindAllSubmatch(data, -1) {
		p.report.Relayed[string(m[1])]++
	}
}

// countTakenBack adds the calls h took back from a stalled owner, by outcome, to the report.
func (p *partitionRun) countTakenBack(h *clusterHost) {
	data, err := os.ReadFile(h.proc.logPath)
	if err != nil {
		return
	}
	for _, m := range takenBack.FindAllSubmatch(data, -1) {
		p.report.FailedOver[string(m[1])]++
	}
}
