// Package chaos is vigil's chaos suite: it runs a vigil server subprocess and stock-SDK worker
// subprocesses running standalone activities, injects faults at seeded random points (SIGKILL
// of the server, SIGKILL and SIGSTOP/SIGCONT of workers, a PostgreSQL restart, a full disk
// under the SQLite file), and then checks what a user relies on: every acknowledged activity
// finished exactly once with its own result, well before its StartToClose; no live worker was
// ever shown INACTIVE; a stopped worker's late completion was refused; the database is intact.
// See README.md; the short form runs in `go test`, the long form is `go run ./tests/chaos/cmd`.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

// Config is one chaos run.
type Config struct {
	Seed        int64
	ServerKills int // SIGKILLs of the server, each followed by a restart on the same store
	WorkerKills int // SIGKILLs of a worker (a new worker replaces it)
	WorkerStops int // SIGSTOP of a worker until the server declared it lost, then SIGCONT
	// DiskFull fills a small tmpfs holding the SQLite file, once (needs root to mount;
	// skipped otherwise, and with PostgreSQL).
	DiskFull bool
	// Postgres, if set, is the DSN of an existing database (e.g. .../test): the run creates a
	// fresh database next to it for the server, and drops it at the end.
	Postgres string
	// PGCluster ("15 main") is restarted PGRestarts times with pg_ctlcluster under load.
	PGCluster  string
	PGRestarts int
	Workers    int           // workers running at a time (default 3)
	StartEvery time.Duration // pace of new activities while faults run (default 200 ms)
	MaxHold    time.Duration // each activity holds a random time up to this (default 2 s)
	// StartToClose of every activity (default 10 min): a recovery that relies on it would
	// strand an activity far beyond Strand.
	StartToClose time.Duration
	// Strand: an activity not finished this long after the last fault (default 2 min) is
	// reported stranded.
	Strand time.Duration
	Dir    string   // working directory (store, logs, events)
	Bin    Binaries // from Build
	Logf   func(format string, args ...any)
}

// Report is what a run measured and found.
type Report struct {
	Seed         int64
	Backend      string
	Faults       map[string]int
	Acknowledged int
	Completed    int
	// Executions counts attempts the workers started (more than Acknowledged when
	// attempts were rescheduled).
	Executions int
	// LateRefused counts late responses of stopped workers that the server refused.
	LateRefused int
	// DiskFullCodes counts, by code, the answers to starts while the disk was full.
	DiskFullCodes map[string]int
	// LivenessPolls counts successful liveness listings checked for INACTIVE live workers.
	LivenessPolls int
	MaxCompletion time.Duration // acknowledgement to result, the slowest activity
	Slowest       string        // its ID and timeline
	// MaxDelivery: the longest a client waited for a result after the server had accepted
	// the completion.
	MaxDelivery time.Duration
	Checks      []string // checks made (each passed unless a violation names it)
	Violations  []string
	Skipped     []string
	Elapsed     time.Duration
}

// OK reports whether every check passed.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %s, %v\n", r.Seed, r.Backend, r.Elapsed.Round(time.Second))
	var names []string
	for k := range r.Faults {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "  fault %-28s %d\n", k, r.Faults[k])
	}
	fmt.Fprintf(&b, "  activities acknowledged %d, completed %d, attempts started %d, slowest %v (%s)\n",
		r.Acknowledged, r.Completed, r.Executions, r.MaxCompletion.Round(time.Millisecond), r.Slowest)
	fmt.Fprintf(&b, "  longest wait for a result after its completion was accepted %v\n", r.MaxDelivery.Round(time.Millisecond))
	fmt.Fprintf(&b, "  late responses of stopped workers refused %d; liveness listings checked %d\n", r.LateRefused, r.LivenessPolls)
	if len(r.DiskFullCodes) > 0 {
		fmt.Fprintf(&b, "  starts while the disk was full: %v\n", r.DiskFullCodes)
	}
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "  check: %s\n", c)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "  skipped: %s\n", s)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  VIOLATION: %s\n", v)
	}
	return b.String()
}

type act struct {
	in       Input
	runID    string
	ackAt    time.Time
	doneAt   time.Time
	result   string
	err      error
	finished bool
}

type stopRecord struct {
	worker *workerProc
	// lost are the activities in flight when it was stopped, then started by another worker,
	// each with the attempt the stopped worker held: only that attempt's response is late. The
	// worker, resumed, may be given a later attempt of the same activity (its successor died
	// too), and answer that one rightly.
	lost   map[string]string
	contAt time.Time
}

type runner struct {
	cfg    Config
	rng    *rand.Rand // faults: used by the fault goroutine only
	inRng  *rand.Rand // activity inputs: used under mu
	report *Report
	srv    *serverProc
	sdk    client.Client
	raw    workflowservice.WorkflowServiceClient
	rawCC  *grpc.ClientConn
	dbPath string

	resultsCtx    context.Context
	cancelResults context.CancelFunc
	getters       sync.WaitGroup

	mu          sync.Mutex
	live        []*workerProc // running, never faulted
	all         []*workerProc
	faulted     map[string]bool
	acts        map[string]*act
	nextWorker  int
	nextAct     int
	diskFull    bool
	spaceBack   time.Time
	inactive    map[string]bool // identities last listed INACTIVE
	inactiveBad map[string]bool
	stops       []*stopRecord
	lastFault   time.Time
	violations  []string
}

func (r *runner) logf(format string, args ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, args...)
	}
}

func (r *runner) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

func (r *runner) fault(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report.Faults[name]++
	r.lastFault = time.Now()
}

// Run performs one chaos run. An error means the run could not be carried out (a build or a
// start failed); what the checks found is in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Workers == 0 {
		cfg.Workers = 3
	}
	if cfg.StartEvery == 0 {
		cfg.StartEvery = 200 * time.Millisecond
	}
	if cfg.MaxHold == 0 {
		cfg.MaxHold = 2 * time.Second
	}
	if cfg.StartToClose == 0 {
		cfg.StartToClose = 10 * time.Minute
	}
	if cfg.Strand == 0 {
		cfg.Strand = 2 * time.Minute
	}
	began := time.Now()
	r := &runner{
		cfg: cfg, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6368616f73)), inRng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x696e707574)),
		report:  &Report{Seed: cfg.Seed, Faults: map[string]int{}, DiskFullCodes: map[string]int{}},
		faulted: map[string]bool{}, acts: map[string]*act{}, inactive: map[string]bool{}, inactiveBad: map[string]bool{},
	}
	defer func() { r.report.Elapsed = time.Since(began) }()
	r.resultsCtx, r.cancelResults = context.WithCancel(ctx)
	defer r.cancelResults()
	r.logf("chaos: seed %d", cfg.Seed)

	storeArgs, cleanup, err := r.prepareStore(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	srv, err := newServerProc(cfg.Bin.Vigil, cfg.Dir, storeArgs, []string{
		// 5 missed heartbeats, not 3: on a starved box a live worker process can miss three
		// in a row, which would be the box's fault, not the server's.
		`worker.defaultLeaseDuration="5s"`,
		`worker.leaseIntervalMultiplier=5`,
		`history.leaseExpiryGraceAfterRestart="10s"`,
	})
	if err != nil {
		return nil, err
	}
	r.srv = srv
	defer srv.conn.Close()
	if err := srv.start(); err != nil {
		return nil, err
	}
	defer srv.kill()
	if err := srv.waitReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	r.rawCC, err = grpc.NewClient(srv.address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer r.rawCC.Close()
	r.raw = workflowservice.NewWorkflowServiceClient(r.rawCC)
	r.sdk, err = client.Dial(client.Options{HostPort: srv.address(), Identity: "chaos-client", Logger: quietLogger{}})
	if err != nil {
		return nil, err
	}
	defer r.sdk.Close()

	for range cfg.Workers {
		if err := r.addWorker(ctx); err != nil {
			return nil, err
		}
	}
	defer func() {
		r.mu.Lock()
		all := r.all
		r.mu.Unlock()
		for _, w := range all {
			w.kill()
		}
	}()

	monitorCtx, stopMonitor := context.WithCancel(ctx)
	monitorDone := make(chan struct{})
	go func() { defer close(monitorDone); r.monitorLiveness(monitorCtx) }()

	loadCtx, stopLoad := context.WithCancel(ctx)
	var loadWG sync.WaitGroup
	loadWG.Add(1)
	go func() { defer loadWG.Done(); r.load(loadCtx, &loadWG) }()

	faultErr := r.injectFaults(ctx)
	stopLoad()
	loadWG.Wait()
	if faultErr != nil {
		r.cancelResults()
		r.getters.Wait()
		stopMonitor()
		<-monitorDone
		return r.report, faultErr
	}
	r.awaitResults()
	r.awaitLateResponses(ctx)
	stopMonitor()
	<-monitorDone
	r.check()
	srv.stop()
	if r.dbPath != "" {
		r.checkIntegrity()
	}
	r.report.Violations = append(r.report.Violations, r.violations...)
	return r.report, nil
}

// prepareStore returns the server's store flags and a cleanup.
func (r *runner) prepareStore(ctx context.Context) ([]string, func(), error) {
	if r.cfg.Postgres != "" {
		r.report.Backend = "PostgreSQL"
		if r.cfg.DiskFull {
			r.report.Skipped = append(r.report.Skipped, "full disk: runs on SQLite only")
			r.cfg.DiskFull = false
		}
		dsn, drop, err := createDatabase(ctx, r.cfg.Postgres, fmt.Sprintf("vigil_chaos_%d_%d", r.cfg.Seed&0xffffff, os.Getpid()))
		if err != nil {
			return nil, nil, err
		}
		config := filepath.Join(r.cfg.Dir, "server.yaml")
		yaml := fmt.Sprintf("persistence:\n  driver: postgres\n  postgres:\n    dsn: %q\n", dsn)
		if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
			drop()
			return nil, nil, err
		}
		if r.cfg.PGRestarts > 0 && r.cfg.PGCluster == "" {
			r.report.Skipped = append(r.report.Skipped, "PostgreSQL restart: no cluster given")
			r.cfg.PGRestarts = 0
		}
		return []string{"--config", config}, drop, nil
	}
	r.report.Backend = "SQLite"
	if r.cfg.PGRestarts > 0 {
		r.report.Skipped = append(r.report.Skipped, "PostgreSQL restart: the server runs on SQLite")
		r.cfg.PGRestarts = 0
	}
	dataDir := filepath.Join(r.cfg.Dir, "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, nil, err
	}
	cleanup := func() {}
	if r.cfg.DiskFull {
		if os.Geteuid() != 0 {
			r.report.Skipped = append(r.report.Skipped, "full disk: not root, cannot mount a tmpfs")
			r.cfg.DiskFull = false
		} else if out, err := exec.CommandContext(ctx, "mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", dataDir).CombinedOutput(); err != nil {
			r.report.Skipped = append(r.report.Skipped, fmt.Sprintf("full disk: mount tmpfs: %v %s", err, strings.TrimSpace(string(out))))
			r.cfg.DiskFull = false
		} else {
			cleanup = func() { _ = exec.Command("umount", "-l", dataDir).Run() }
		}
	}
	r.dbPath = filepath.Join(dataDir, "vigil.db")
	return []string{"--db-filename", r.dbPath}, cleanup, nil
}

func (r *runner) addWorker(ctx context.Context) error {
	r.mu.Lock()
	r.nextWorker++
	name := fmt.Sprintf("chaos-w%d", r.nextWorker)
	r.mu.Unlock()
	w, err := startWorker(ctx, r.cfg.Bin.Worker, r.srv.address(), "chaos", name, r.cfg.Dir)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.live = append(r.live, w)
	r.all = append(r.all, w)
	r.mu.Unlock()
	return nil
}

// load starts activities at the configured pace until ctx ends.
func (r *runner) load(ctx context.Context, wg *sync.WaitGroup) {
	tick := time.NewTicker(r.cfg.StartEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		wg.Add(1)
		go func() { defer wg.Done(); r.startActivity(ctx) }()
	}
}

// startActivity starts one activity, retrying (same ID, USE_EXISTING) until the server
// acknowledges it or a minute passes. Only an acknowledged activity is owed a result.
func (r *runner) startActivity(ctx context.Context) {
	r.mu.Lock()
	r.nextAct++
	in := Input{ID: fmt.Sprintf("act-%d-%d", r.cfg.Seed&0xffffff, r.nextAct), Nonce: fmt.Sprintf("%x", r.inRng.Uint64()),
		HoldMs: r.inRng.IntN(int(r.cfg.MaxHold/time.Millisecond) + 1)}
	r.mu.Unlock()
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(in)
	if err != nil {
		r.violate("encode input: %v", err)
		return
	}
	req := &workflowservice.StartActivityExecutionRequest{
		Namespace: "default", Identity: "chaos-client", RequestId: in.ID, ActivityId: in.ID,
		ActivityType: &commonpb.ActivityType{Name: "chaos"}, TaskQueue: &taskqueuepb.TaskQueue{Name: "chaos"},
		StartToCloseTimeout: durationpb.New(r.cfg.StartToClose), Input: payloads,
		IdConflictPolicy: enumspb.ACTIVITY_ID_CONFLICT_POLICY_USE_EXISTING,
	}
	giveUp := time.Now().Add(time.Minute)
	for time.Now().Before(giveUp) {
		callCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := r.raw.StartActivityExecution(callCtx, req)
		cancel()
		r.mu.Lock()
		if r.diskFull {
			r.report.DiskFullCodes[status.Code(err).String()]++
		}
		if err == nil {
			a := &act{in: in, runID: resp.GetRunId(), ackAt: time.Now()}
			r.acts[in.ID] = a
			r.getters.Add(1)
			go r.await(a)
		}
		r.mu.Unlock()
		if err == nil {
			return
		}
		if ctx.Err() != nil && time.Now().After(giveUp.Add(-50*time.Second)) {
			return // the run is ending: stop retrying after ten seconds
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// monitorLiveness lists the workers' liveness until ctx ends, and records every worker of
// this run shown INACTIVE that was never killed or stopped.
func (r *runner) monitorLiveness(ctx context.Context) {
	for ctx.Err() == nil {
		var token []byte
		states := map[string]livenesspb.LivenessState{}
		resurrected := map[string]int64{}
		complete := true
		for {
			callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := r.srv.liveness.ListWorkerLiveness(callCtx, &livenesspb.ListWorkerLivenessRequest{
				Namespace: "default", PageSize: 1000, NextPageToken: token,
			})
			cancel()
			if err != nil {
				complete = false
				break
			}
			for _, w := range resp.GetWorkers() {
				states[w.GetLastHeartbeat().GetWorkerIdentity()] = w.GetState()
				resurrected[w.GetLastHeartbeat().GetWorkerIdentity()] += w.GetResurrectionCount()
			}
			if token = resp.GetNextPageToken(); len(token) == 0 {
				break
			}
		}
		r.mu.Lock()
		for identity, state := range states {
			inactive := state == livenesspb.LivenessState_LIVENESS_STATE_INACTIVE
			r.inactive[identity] = inactive
			// A resurrection means it was INACTIVE between two listings.
			if (inactive || resurrected[identity] > 0) && strings.HasPrefix(identity, "chaos-w") && !r.faulted[identity] && !r.inactiveBad[identity] {
				r.inactiveBad[identity] = true
				r.violations = append(r.violations, fmt.Sprintf("live worker %s (never killed or stopped) was declared INACTIVE (listed %s, resurrections %d) at %s",
					identity, state, resurrected[identity], time.Now().UTC().Format(time.RFC3339Nano)))
			}
		}
		if complete {
			r.report.LivenessPolls++
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// injectFaults runs the faults in a seeded random order at seeded random points.
func (r *runner) injectFaults(ctx context.Context) error {
	var faults []string
	add := func(name string, n int) {
		for range n {
			faults = append(faults, name)
		}
	}
	add("server", r.cfg.ServerKills)
	add("workerKill", r.cfg.WorkerKills)
	add("workerStop", r.cfg.WorkerStops)
	add("pg", r.cfg.PGRestarts)
	if r.cfg.DiskFull {
		add("disk", 1)
	}
	r.rng.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
	r.logf("chaos: %d faults: %s", len(faults), strings.Join(faults, " "))
	for i := 0; i < len(faults); i++ {
		if err := sleep(ctx, time.Duration(300+r.rng.IntN(1700))*time.Millisecond); err != nil {
			return err
		}
		if err := r.checkServerAlive(); err != nil {
			return err
		}
		var err error
		switch faults[i] {
		case "server":
			// One kill in four lands while the restarted server is still recovering.
			early := i+1 < len(faults) && faults[i+1] == "server" && r.rng.IntN(4) == 0
			if err = r.killServer(ctx, early); err == nil && early {
				i++
				err = r.killServer(ctx, false)
			}
		case "workerKill":
			err = r.killWorker(ctx)
		case "workerStop":
			err = r.stopWorker(ctx)
		case "pg":
			err = r.restartPostgres(ctx)
		case "disk":
			err = r.fillDisk(ctx)
		}
		if err != nil {
			return err
		}
	}
	return sleep(ctx, time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func (r *runner) checkServerAlive() error {
	select {
	case <-r.srv.exited:
		r.violate("the vigil server exited on its own; log %s:\n%s", r.srv.logPath, tail(r.srv.logPath, 3000))
		if err := r.srv.start(); err != nil {
			return err
		}
		return r.srv.waitReady(context.Background(), 2*time.Minute)
	default:
		return nil
	}
}

// killServer SIGKILLs the server and restarts it on the same store. With early, it returns
// right after the restart, so that the next kill lands during recovery.
func (r *runner) killServer(ctx context.Context, early bool) error {
	r.fault("server SIGKILL")
	r.srv.kill()
	if err := r.srv.start(); err != nil {
		return err
	}
	if early {
		r.fault("server SIGKILL, of them in recovery")
		return sleep(ctx, time.Duration(r.rng.IntN(300))*time.Millisecond)
	}
	return r.srv.waitReady(ctx, 2*time.Minute)
}

// pickWorker picks a live, never-faulted worker, preferring one running an activity (it waits
// up to ten seconds for one).
func (r *runner) pickWorker(ctx context.Context) *workerProc {
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		live := append([]*workerProc(nil), r.live...)
		r.mu.Unlock()
		var busy []*workerProc
		for _, w := range live {
			if len(inFlight(readEvents(w.events, w.name))) > 0 {
				busy = append(busy, w)
			}
		}
		if len(busy) > 0 {
			return busy[r.rng.IntN(len(busy))]
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return live[r.rng.IntN(len(live))]
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *runner) retire(w *workerProc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faulted[w.name] = true
	for i, l := range r.live {
		if l == w {
			r.live = append(r.live[:i], r.live[i+1:]...)
			break
		}
	}
}

func (r *runner) killWorker(ctx context.Context) error {
	w := r.pickWorker(ctx)
	r.retire(w)
	r.fault("worker SIGKILL")
	w.kill()
	r.logf("chaos: killed worker %s", w.name)
	return r.addWorker(ctx)
}

// stopWorker SIGSTOPs a worker running activities until the server has declared it lost and
// other workers have started its activities, then SIGCONTs it: its late responses must be
// refused.
func (r *runner) stopWorker(ctx context.Context) error {
	w := r.pickWorker(ctx)
	r.retire(w)
	held := inFlight(readEvents(w.events, w.name))
	r.fault("worker SIGSTOP/SIGCONT")
	stoppedAt := time.Now()
	w.signal(syscall.SIGSTOP)
	if err := r.addWorker(ctx); err != nil { // keep the capacity
		return err
	}
	rec := &stopRecord{worker: w, lost: map[string]string{}}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r.mu.Lock()
		inactive := r.inactive[w.name]
		all := append([]*workerProc(nil), r.all...)
		r.mu.Unlock()
		restarted := map[string]string{}
		for _, o := range all {
			if o == w {
				continue
			}
			for _, e := range readEvents(o.events, o.name) {
				if attempt, ok := held[e.activity]; ok && e.kind == "started" && e.at.After(stoppedAt) {
					restarted[e.activity] = attempt
				}
			}
		}
		if inactive && len(restarted) == len(held) {
			rec.lost = restarted
			break
		}
		if time.Now().After(deadline) {
			r.violate("worker %s stopped for 2 min: shown INACTIVE %v, %d of its %d activities started elsewhere",
				w.name, inactive, len(restarted), len(held))
			rec.lost = restarted
			break
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	rec.contAt = time.Now()
	w.signal(syscall.SIGCONT)
	r.logf("chaos: stopped worker %s for %v; %d of its activities moved", w.name, rec.contAt.Sub(stoppedAt).Round(time.Millisecond), len(rec.lost))
	r.mu.Lock()
	r.stops = append(r.stops, rec)
	r.mu.Unlock()
	return nil
}

func (r *runner) restartPostgres(ctx context.Context) error {
	args := append(strings.Fields(r.cfg.PGCluster), "restart")
	r.fault("PostgreSQL restart")
	if out, err := exec.CommandContext(ctx, "pg_ctlcluster", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctlcluster %s: %v %s", strings.Join(args, " "), err, out)
	}
	r.logf("chaos: restarted PostgreSQL %s", r.cfg.PGCluster)
	return nil
}

// fillDisk fills the tmpfs under the SQLite file, keeps it full while starts are refused,
// then frees the space and waits until a start succeeds again.
func (r *runner) fillDisk(ctx context.Context) error {
	filler := filepath.Join(filepath.Dir(r.dbPath), "filler")
	f, err := os.Create(filler)
	if err != nil {
		return err
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				_ = f.Close()
				return err
			}
			break
		}
	}
	_ = f.Sync()
	_ = f.Close()
	r.fault("full disk")
	r.mu.Lock()
	r.diskFull = true
	r.mu.Unlock()
	// Keep it full until a few writes were refused (or 15 s passed: SQLite may find room in
	// free pages for a while).
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		refused := 0
		for code, n := range r.report.DiskFullCodes {
			if code != codes.OK.String() {
				refused += n
			}
		}
		r.mu.Unlock()
		if refused >= 5 {
			break
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	if err := r.checkServerAlive(); err != nil {
		return err
	}
	if err := os.Remove(filler); err != nil {
		return err
	}
	r.mu.Lock()
	r.diskFull = false
	r.spaceBack = time.Now()
	r.mu.Unlock()
	r.logf("chaos: disk full for a while; space back")
	return nil
}

// await fetches an activity's result from its acknowledgement on, through the faults, until
// it has it or the results deadline passes.
func (r *runner) await(a *act) {
	defer r.getters.Done()
	h := r.sdk.GetActivityHandle(client.GetActivityHandleOptions{ActivityID: a.in.ID, RunID: a.runID})
	for r.resultsCtx.Err() == nil {
		var out string
		err := h.Get(r.resultsCtx, &out)
		if err == nil || terminal(err) {
			r.mu.Lock()
			a.finished, a.result, a.err, a.doneAt = true, out, err, time.Now()
			r.mu.Unlock()
			return
		}
		_ = sleep(r.resultsCtx, 200*time.Millisecond)
	}
}

// awaitResults waits for the result of every acknowledged activity, up to Strand after the
// last fault.
func (r *runner) awaitResults() {
	r.mu.Lock()
	deadline := r.lastFault.Add(r.cfg.Strand)
	r.mu.Unlock()
	if d := time.Now().Add(r.cfg.Strand / 2); d.After(deadline) {
		deadline = d
	}
	stop := time.AfterFunc(time.Until(deadline), r.cancelResults)
	defer stop.Stop()
	r.getters.Wait()
}

// terminal reports whether a Get error is the activity's outcome rather than a failed call.
func terminal(err error) bool {
	var app *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	var canceled *temporal.CanceledError
	var terminated *temporal.TerminatedError
	return errors.As(err, &app) || errors.As(err, &timeout) || errors.As(err, &canceled) || errors.As(err, &terminated)
}

// awaitLateResponses waits until each stopped worker has answered for every activity it lost.
func (r *runner) awaitLateResponses(ctx context.Context) {
	r.mu.Lock()
	stops := append([]*stopRecord(nil), r.stops...)
	r.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for _, s := range stops {
		for {
			answered := map[string]bool{}
			for _, e := range readEvents(s.worker.events, s.worker.name) {
				if attempt, ok := s.lost[e.activity]; ok && e.attempt == attempt && strings.HasPrefix(e.kind, "respond-") && e.at.After(s.contAt) {
					answered[e.activity] = true
				}
			}
			if len(answered) == len(s.lost) || time.Now().After(deadline) || sleep(ctx, 100*time.Millisecond) != nil {
				break
			}
		}
	}
}

// check compares what the workers did with what the client got.
func (r *runner) check() {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := r.report
	events := map[string][]event{} // by activity
	for _, w := range r.all {
		for _, e := range readEvents(w.events, w.name) {
			events[e.activity] = append(events[e.activity], e)
			if e.kind == "started" {
				rep.Executions++
			}
		}
	}
	rep.Acknowledged = len(r.acts)
	ids := make([]string, 0, len(r.acts))
	for id := range r.acts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := r.acts[id]
		switch {
		case !a.finished:
			r.violations = append(r.violations, fmt.Sprintf("activity %s (acknowledged %s) has no result %v after the last fault (StartToClose %v); %s",
				id, a.ackAt.UTC().Format(time.RFC3339Nano), r.cfg.Strand, r.cfg.StartToClose, timeline(id, a, events[id])))
			continue
		case a.err != nil:
			r.violations = append(r.violations, fmt.Sprintf("activity %s ended with an error: %v", id, a.err))
			continue
		}
		rep.Completed++
		if d := a.doneAt.Sub(a.ackAt); d > rep.MaxCompletion {
			rep.MaxCompletion, rep.Slowest = d, timeline(id, a, events[id])
		}
		prefix := Result(a.in.ID, a.in.Nonce, "")
		if !strings.HasPrefix(a.result, prefix) {
			r.violations = append(r.violations, fmt.Sprintf("activity %s returned %q, not its own result (%s<worker>)", id, a.result, prefix))
			continue
		}
		by := strings.TrimPrefix(a.result, prefix)
		ran, accepted := false, map[string]int{}
		for _, e := range events[id] {
			if e.worker == by && e.kind == "finished" {
				ran = true
			}
			if e.kind == "respond-ok" && strings.HasPrefix(e.detail, "RespondActivityTaskCompleted") {
				accepted[e.worker]++
				rep.MaxDelivery = max(rep.MaxDelivery, a.doneAt.Sub(e.at))
			}
		}
		if !ran {
			r.violations = append(r.violations, fmt.Sprintf("activity %s: result names %s, which never finished it", id, by))
		}
		total := 0
		for w, n := range accepted {
			total += n
			if w != by {
				r.violations = append(r.violations, fmt.Sprintf("activity %s: the server accepted a response of %s, but the result is %s's", id, w, by))
			}
		}
		if total > 1 {
			r.violations = append(r.violations, fmt.Sprintf("activity %s: the server accepted %d responses (duplicate completion)", id, total))
		}
	}
	rep.Checks = append(rep.Checks,
		fmt.Sprintf("%d acknowledged activities each finished with their own result within %v of the last fault (StartToClose %v)", rep.Acknowledged, r.cfg.Strand, r.cfg.StartToClose),
		"no activity had more than one response accepted, and only the response of the worker whose result the client got",
		"no worker that was never killed or stopped was listed INACTIVE or resurrected")
	for _, s := range r.stops {
		for id, lostAttempt := range s.lost {
			answered, laterAccepted := false, false
			for _, e := range events[id] {
				if e.worker != s.worker.name || !e.at.After(s.contAt) {
					continue
				}
				if e.attempt != lostAttempt {
					// A later attempt given to the resumed worker: its own to answer.
					laterAccepted = laterAccepted || e.kind == "respond-ok"
					continue
				}
				switch e.kind {
				case "respond-refused":
					answered = true
					rep.LateRefused++
				case "respond-ok":
					answered = true
					r.violations = append(r.violations, fmt.Sprintf("stopped worker %s: its late response for %s (attempt %s) was accepted", s.worker.name, id, lostAttempt))
				}
			}
			if !answered {
				r.violations = append(r.violations, fmt.Sprintf("stopped worker %s never had its late response for %s refused", s.worker.name, id))
			}
			if a := r.acts[id]; a != nil && !laterAccepted && strings.HasSuffix(a.result, "/"+s.worker.name) {
				r.violations = append(r.violations, fmt.Sprintf("activity %s: the result is the stopped worker %s's, not its successor's", id, s.worker.name))
			}
		}
	}
	if len(r.stops) > 0 {
		rep.Checks = append(rep.Checks, "every late response of a stopped worker, for an activity moved to another worker, was refused, and the result is the successor's")
	}
	if r.report.Faults["full disk"] > 0 {
		refused, unclean := 0, map[string]int{}
		for code, n := range rep.DiskFullCodes {
			switch code {
			case codes.OK.String():
			case codes.Unavailable.String(), codes.ResourceExhausted.String():
				refused += n
			default:
				unclean[code] += n
			}
		}
		if len(unclean) > 0 {
			r.violations = append(r.violations, fmt.Sprintf("starts on a full disk failed with codes other than Unavailable/ResourceExhausted: %v", unclean))
		}
		if refused == 0 {
			r.violations = append(r.violations, "no start was refused while the disk was full")
		}
		resumed := false
		for _, a := range r.acts {
			resumed = resumed || (a.ackAt.After(r.spaceBack) && a.finished && a.err == nil)
		}
		if !resumed {
			r.violations = append(r.violations, "no activity started and completed after space came back")
		}
		rep.Checks = append(rep.Checks, "on a full disk, writes were refused with Unavailable/ResourceExhausted; acknowledged work survived and writes resumed")
	}
}

// timeline describes what happened to an activity, in offsets from its acknowledgement.
func timeline(id string, a *act, events []event) string {
	sort.Slice(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	parts := []string{id + ": acknowledged"}
	for _, e := range events {
		parts = append(parts, fmt.Sprintf("+%v %s %s #%s", e.at.Sub(a.ackAt).Round(time.Millisecond), e.worker, e.kind, e.attempt))
	}
	if a.finished {
		parts = append(parts, fmt.Sprintf("+%v result", a.doneAt.Sub(a.ackAt).Round(time.Millisecond)))
	} else {
		parts = append(parts, "no result")
	}
	return strings.Join(parts, ", ")
}

func (r *runner) checkIntegrity() {
	result, err := integrityCheck(r.dbPath)
	switch {
	case err != nil:
		r.violations = append(r.violations, fmt.Sprintf("PRAGMA integrity_check: %v", err))
	case result != "ok":
		r.violations = append(r.violations, fmt.Sprintf("PRAGMA integrity_check: %s", result))
	default:
		r.report.Checks = append(r.report.Checks, "PRAGMA integrity_check: ok")
	}
}

type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
