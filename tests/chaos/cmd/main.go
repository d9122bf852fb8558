// Command cmd is the chaos suite's long form (tests/chaos/README.md):
//
//	go run ./tests/chaos/cmd -server-kills 100 -worker-kills 10 -worker-stops 5 -disk-full
//	go run ./tests/chaos/cmd -rounds 10 -server-kills 20           # 20 kills in a row, 10 times
//	go run ./tests/chaos/cmd -postgres postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	    -pg-cluster "15 main" -pg-restarts 3 -server-kills 20
//
//	go run ./tests/chaos/cmd -partition pg-freeze,pg-refuse -rounds 3 -fleet 300 \
//	    -postgres postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//
// It prints each round's report and exits 1 if any check failed in any round.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vigilhq/vigil/tests/chaos"
)

func main() {
	var (
		seed        = flag.Int64("seed", 0, "seed of the first round (0: from the clock); round i uses seed+i")
		rounds      = flag.Int("rounds", 1, "runs, each on a fresh store")
		serverKills = flag.Int("server-kills", 100, "server SIGKILLs per round")
		workerKills = flag.Int("worker-kills", 0, "worker SIGKILLs per round")
		workerStops = flag.Int("worker-stops", 0, "worker SIGSTOP/SIGCONTs per round")
		diskFull    = flag.Bool("disk-full", false, "fill a tmpfs under the SQLite file once per round (root only)")
		postgres    = flag.String("postgres", "", "run the server on a fresh database created next to this PostgreSQL DSN (URL form)")
		pgCluster   = flag.String("pg-cluster", "", `PostgreSQL cluster to restart under load, as pg_ctlcluster names it ("15 main")`)
		pgRestarts  = flag.Int("pg-restarts", 0, "PostgreSQL restarts per round (needs -postgres and -pg-cluster)")
		startEvery  = flag.Duration("start-every", 200*time.Millisecond, "pace of new activities")
		maxHold     = flag.Duration("max-hold", 2*time.Second, "longest an activity holds")
		strand      = flag.Duration("strand", 2*time.Minute, "an activity without a result this long after the last fault is stranded")
		keep        = flag.Bool("keep", false, "keep the working directory (logs, events, database)")
		vigilBin    = flag.String("vigil", "", "a vigil binary to test instead of building ./cmd/vigil")
		partition   = flag.String("partition", "", "run these partition scenarios (comma-separated, or \"all\") on three hosts instead (needs -postgres)")
		fleet       = flag.Int("fleet", 300, "simulated workers heartbeating through hosts 2 and 3 in a partition scenario")
	)
	flag.Parse()
	if *seed == 0 {
		*seed = time.Now().UnixNano()
	}
	work, err := os.MkdirTemp("", "vigil-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	// exit removes the working directory unless it is kept (asked for, or a round failed and
	// its logs are wanted), then exits: os.Exit runs no deferred call.
	exit := func(code int) {
		if !*keep {
			_ = os.RemoveAll(work)
		}
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, err := chaos.Build(ctx, filepath.Join(work, "bin"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		exit(2)
	}
	if *vigilBin != "" {
		bin.Vigil = *vigilBin
	}
	if *partition != "" {
		exit(runPartitions(ctx, *partition, *rounds, *postgres, *fleet, work, bin, keep))
	}
	failed := 0
	totals := map[string]int{}
	acknowledged, completed, violations := 0, 0, 0
	var slowest, delivery time.Duration
	for i := range *rounds {
		if ctx.Err() != nil {
			break
		}
		dir := filepath.Join(work, fmt.Sprintf("round-%d", i+1))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			exit(2)
		}
		report, err := chaos.Run(ctx, chaos.Config{
			Seed: *seed + int64(i), ServerKills: *serverKills, WorkerKills: *workerKills, WorkerStops: *workerStops,
			DiskFull: *diskFull, Postgres: *postgres, PGCluster: *pgCluster, PGRestarts: *pgRestarts,
			StartEvery: *startEvery, MaxHold: *maxHold, Strand: *strand, Dir: dir, Bin: bin,
			Logf: func(format string, args ...any) {
				fmt.Printf("%s round %d: %s\n", time.Now().UTC().Format("15:04:05"), i+1, fmt.Sprintf(format, args...))
			},
		})
		if report != nil {
			fmt.Printf("round %d/%d: %s", i+1, *rounds, report)
			for k, n := range report.Faults {
				totals[k] += n
			}
			acknowledged += report.Acknowledged
			completed += report.Completed
			violations += len(report.Violations)
			slowest = max(slowest, report.MaxCompletion)
			delivery = max(delivery, report.MaxDelivery)
			if !report.OK() {
				failed++
				fmt.Printf("round %d FAILED; logs kept in %s\n", i+1, dir)
				*keep = true
			}
		}
		if err != nil {
			fmt.Printf("round %d could not run: %v\n", i+1, err)
			failed++
			*keep = true
		}
	}
	fmt.Printf("TOTAL: %d rounds (%d failed), faults %v, activities acknowledged %d, completed %d, slowest %v, longest result delivery %v, violations %d\n",
		*rounds, failed, totals, acknowledged, completed, slowest.Round(time.Millisecond), delivery.Round(time.Millisecond), violations)
	if *keep {
		fmt.Println("working directory:", work)
	}
	if failed > 0 {
		exit(1)
	}
	exit(0)
}

// runPartitions runs each scenario rounds times and prints every report and, per scenario,
// the spread of its figures; it returns the exit code.
func runPartitions(ctx context.Context, list string, rounds int, postgres string, fleet int, work string, bin chaos.Binaries, keep *bool) int {
	scenarios := strings.Split(list, ",")
	if list == "all" {
		scenarios = chaos.Scenarios
	}
	for _, s := range scenarios {
		if postgres == "" && s != chaos.ScenarioPGRestart {
			fmt.Fprintf(os.Stderr, "chaos: -partition %s needs -postgres\n", s)
			return 2
		}
	}
	failed := 0
	for _, scenario := range scenarios {
		var served, rejoined []time.Duration
		var errs, calls, acks int64
		for i := range rounds {
			if ctx.Err() != nil {
				return 1
			}
			dir := filepath.Join(work, fmt.Sprintf("%s-%d", scenario, i+1))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				fmt.Fprintln(os.Stderr, "chaos:", err)
				return 2
			}
			report, err := chaos.PartitionRun(ctx, chaos.PartitionConfig{
				Scenario: scenario, Postgres: postgres, Fleet: fleet, Dir: dir, Bin: bin,
				Logf: func(format string, args ...any) {
					fmt.Printf("%s %s %d: %s\n", time.Now().UTC().Format("15:04:05"), scenario, i+1, fmt.Sprintf(format, args...))
				},
			})
			if report != nil {
				fmt.Printf("%s round %d/%d: %s", scenario, i+1, rounds, report)
				served = append(served, report.ShardsServedAfter)
				rejoined = append(rejoined, report.RejoinedAfter)
				errs += report.FleetErrorCount()
				calls += report.FleetHeartbeats
				acks += int64(report.Acknowledged)
				if !report.OK() {
					failed++
					fmt.Printf("%s round %d FAILED; logs kept in %s\n", scenario, i+1, dir)
					*keep = true
				}
			}
			if err != nil {
				fmt.Printf("%s round %d could not run: %v\n", scenario, i+1, err)
				failed++
				*keep = true
			}
		}
		fmt.Printf("TOTAL %s: %d rounds, every shard served after %s, host 1 back after %s, fleet errors %d of %d heartbeats, activities %d\n",
			scenario, rounds, spread(served), spread(rejoined), errs, calls, acks)
	}
	if *keep {
		fmt.Println("working directory:", work)
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// spread is "min–max" of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	lo, hi := ds[0], ds[0]
	for _, d := range ds {
		lo, hi = min(lo, d), max(hi, d)
	}
	return fmt.Sprintf("%v–%v", lo.Round(10*time.Millisecond), hi.Round(10*time.Millisecond))
}
