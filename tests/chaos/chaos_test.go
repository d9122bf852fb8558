package chaos

import (
	"cmp"
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestChaosShort is the chaos suite's short form: a few of each fault against a SQLite server
// (the full disk only as root), then every check. VIGIL_CHAOS_SEED replays a run.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite: builds and runs a server and worker processes")
	}
	seed := time.Now().UnixNano()
	if v := os.Getenv("VIGIL_CHAOS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("VIGIL_CHAOS_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with VIGIL_CHAOS_SEED=%d)", seed, seed)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin, err := buildOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	report, err := Run(ctx, Config{
		Seed: seed, ServerKills: 4, WorkerKills: 1, WorkerStops: 1, DiskFull: true,
		Strand: 90 * time.Second, Dir: dir, Bin: bin, Logf: t.Logf,
	})
	if report != nil {
		t.Log("\n" + report.String())
	}
	if err != nil {
		t.Fatalf("the run could not be carried out: %v (logs in %s)", err, dir)
	}
	if !report.OK() {
		t.Errorf("%d check(s) failed, seed %d; server log:\n%s", len(report.Violations), seed, tail(dir+"/server.log", 4000))
	}
	if report.Acknowledged == 0 || report.Faults["server SIGKILL"] == 0 {
		t.Errorf("the run did nothing: %d activities, faults %v", report.Acknowledged, report.Faults)
	}
}

// TestChaosPostgres runs the suite against PostgreSQL and restarts it under load. It runs
// only when asked: VIGIL_CHAOS_POSTGRES names a database (URL DSN) next to which a fresh one
// is created and dropped, and VIGIL_CHAOS_PG_CLUSTER the cluster to restart ("15 main"), which
// every other user of that PostgreSQL will notice.
func TestChaosPostgres(t *testing.T) {
	dsn, cluster := os.Getenv("VIGIL_CHAOS_POSTGRES"), os.Getenv("VIGIL_CHAOS_PG_CLUSTER")
	if testing.Short() || dsn == "" || cluster == "" {
		t.Skip("set VIGIL_CHAOS_POSTGRES and VIGIL_CHAOS_PG_CLUSTER to restart a PostgreSQL cluster under load")
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := buildOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	report, err := Run(ctx, Config{
		Seed: seed, ServerKills: 3, WorkerKills: 1, PGRestarts: 2, Postgres: dsn, PGCluster: cluster,
		Strand: 2 * time.Minute, Dir: dir, Bin: bin, Logf: t.Logf,
	})
	if report != nil {
		t.Log("\n" + report.String())
	}
	if err != nil {
		t.Fatalf("the run could not be carried out: %v", err)
	}
	if !report.OK() {
		t.Errorf("%d check(s) failed, seed %d; server log:\n%s", len(report.Violations), seed, tail(dir+"/server.log", 4000))
	}
}

// TestPartitionShort is the partition suite's short form: three `vigil server` processes on
// one PostgreSQL under a fleet of simulated SDK workers heartbeating through hosts 2 and 3 and
// SDK workers running standalone activities, one of them killed at the fault, for each of
// shortScenarios in turn. The fleet sees no error, and every invariant holds (partition.go).
func TestPartitionShort(t *testing.T) {
	if testing.Short() {
		t.Skip("partition suite: builds and runs three servers and worker processes")
	}
	for _, scenario := range shortScenarios {
		t.Run(scenario, func(t *testing.T) { runPartitionShort(t, scenario) })
	}
}

// shortScenarios are the partition scenarios make test runs: host 1's path to PostgreSQL
// frozen (the gray failure the call failover is for), PostgreSQL restarted under every host
// (on an instance of the run's own), and the history port cut between two hosts alone (the
// relay through the third). The others (refused path, renewals stopped) exercise the same
// self-fence and takeover as the frozen path, which is the harder of them.
var shortScenarios = []string{ScenarioPGFreeze, ScenarioPGRestart, ScenarioHistoryCut}

func runPartitionShort(t *testing.T, scenario string) {
	var dsn string
	if ownsPostgres(scenario) {
		if _, err := findPGBin(""); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal(err)
			}
			t.Skip(err)
		}
	} else {
		dsn = postgresForTest(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	bin, err := buildOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// make test runs this beside every other package, under -race, on two cores, where a
	// heartbeat can wait seconds for a CPU: a lease of ten intervals keeps the check about the
	// failover rather than about the box. The long form keeps five.
	report, err := PartitionRun(ctx, PartitionConfig{
		Scenario: scenario, Postgres: dsn, Fleet: 100, LeaseIntervals: 10, Dir: dir, Bin: bin, Logf: t.Logf,
	})
	if report != nil {
		t.Log("\n" + report.String())
	}
	if err != nil {
		t.Fatalf("the run could not be carried out: %v; host 1's log:\n%s", err, tail(dir+"/host-1/server.log", 4000))
	}
	if !report.OK() {
		t.Errorf("%d invariant(s) broken; host 1's log:\n%s", len(report.Violations), tail(dir+"/host-1/server.log", 4000))
	}
	if n := report.FleetErrorCount(); n > 0 {
		t.Errorf("the fleet through the healthy hosts saw %d errors: %v", n, report.FleetErrors)
	}
}

// postgresForTest returns the DSN of the test PostgreSQL (VIGIL_POSTGRES_DSN, or the local
// one); it skips the test when PostgreSQL is unreachable, and fails it under CI.
func postgresForTest(t *testing.T) string {
	t.Helper()
	dsn := cmp.Or(os.Getenv("VIGIL_POSTGRES_DSN"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL unreachable: %v", err)
		}
		t.Skipf("PostgreSQL unreachable (%v); start it or set VIGIL_POSTGRES_DSN", err)
	}
	_ = conn.Close(ctx)
	return dsn
}

var (
	built    Binaries
	buildErr error
	buildMu  sync.Mutex
	buildDir string
)

// buildOnce builds vigil and the chaos worker once for every test of the package.
func buildOnce(ctx context.Context) (Binaries, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir == "" || buildErr != nil {
		dir, err := os.MkdirTemp("", "vigil-chaos-bin-")
		if err != nil {
			return Binaries{}, err
		}
		buildDir = dir
		built, buildErr = Build(ctx, dir)
	}
	return built, buildErr
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}
