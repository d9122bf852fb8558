package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/vigilhq/vigil/bench"
)

// benchGCPercent is the generator's GOGC unless the environment sets one.
const benchGCPercent = 400

// newBenchCmd runs the load generator: progress on stderr, the summary on stdout.
func newBenchCmd(out *outputFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Drive a running server like an SDK fleet and measure it",
		Long: `Drive a running vigil (or Temporal) server on a loopback address like a fleet of SDK workers
heartbeating, and measure it: progress on stderr, the summary on stdout as a table, or with
-o json, jsonl or yaml as one object; --json FILE also writes that object to a file.`,
		Example: `  vigil bench --workers 1000 --interval 1s --duration 30s
  vigil bench --api liveness --workers 200 --kill 10 -o json`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	var cfg bench.Config
	var api, jsonPath, cpuProfile, memProfile string
	fs.StringVar(&cfg.Address, "address", bench.AddressDefault, "vigil frontend address (loopback only); several comma-separated (a cluster's hosts) are used round robin, skipping a host that is down")
	fs.BoolVar(&cfg.RetryResourceExhausted, "retry-resource-exhausted", false, "retry a heartbeat refused with ResourceExhausted (200 ms backoff doubling up to a tenth of the RPC timeout, within it) as the SDK does, instead of counting it as an error")
	fs.BoolVar(&cfg.RetryUnavailable, "retry-unavailable", false, "retry a heartbeat answered Unavailable (10-200 ms backoff, within the RPC timeout) as the SDK does, instead of counting it as an error")
	fs.StringVar(&cfg.Namespace, "namespace", bench.NamespaceDefault, "namespace")
	fs.IntVar(&cfg.Workers, "workers", bench.WorkersDefault, "simulated workers alive at any time")
	fs.DurationVar(&cfg.Interval, "interval", bench.IntervalDefault, "heartbeat interval of each worker (jittered by --jitter)")
	fs.Float64Var(&cfg.Jitter, "jitter", bench.JitterDefault, "spread of each wait between heartbeats, as a share of the interval either way (uniform)")
	fs.DurationVar(&cfg.Duration, "duration", bench.DurationDefault, "how long the load runs (longer with --kill, until the killed workers are handed back)")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "leave the first part of --duration out of the figures (e.g. one --interval, so the fleet's registrations are not counted)")
	fs.IntVar(&cfg.Activities, "activities", 0, "synthetic activities each worker binds on its first heartbeat (needs --api liveness)")
	fs.Float64Var(&cfg.Churn, "churn", 0, "percent of workers that shut down and are replaced by fresh ones every --churn-period")
	fs.DurationVar(&cfg.ChurnPeriod, "churn-period", 0, "period of --churn (default: --interval)")
	fs.IntVar(&cfg.Kill, "kill", 0, "workers that stop heartbeating abruptly in the middle of the run; their detection is measured")
	fs.DurationVar(&cfg.Lease, "lease", 0, "lease requested by --api liveness heartbeats (0: the server decides)")
	fs.StringVar(&api, "api", string(bench.APIPublic), "heartbeat API: public (WorkflowService.RecordWorkerHeartbeat, as the SDK) or liveness (vigil's RecordHeartbeat)")
	fs.IntVar(&cfg.WorkersPerClient, "workers-per-client", bench.WorkersPerClientDefault, "workers per simulated SDK client, sent in one request (--api public)")
	fs.IntVar(&cfg.Connections, "connections", bench.ConnectionsDefault, "gRPC connections the load is spread over")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "sample this process's RSS and CPU from /proc during the run, and report its CPU time per heartbeat answered OK over the steady window (--cpu-window)")
	fs.IntVar(&cfg.StorePID, "store-pid", 0, "with --server-pid: also read the CPU of this process and its children (a PostgreSQL server's postmaster, e.g. pgrep -o -x postgres) over the same window, and report the store's CPU per heartbeat beside the server's")
	fs.DurationVar(&cfg.CPUWindow, "cpu-window", 0, "with --server-pid: the steady window over which the server's CPU per heartbeat is read, from the end of --warmup (default: until the load ends, or until --register-burst)")
	fs.StringVar(&cfg.MetricsURL, "metrics-url", "", "with --kill: also wait until the server's outbound backlog is empty (e.g. http://127.0.0.1:7243/metrics)")
	fs.DurationVar(&cfg.PollInterval, "poll-interval", bench.PollIntervalDefault, "with --kill: how often a killed worker past its lease deadline is described")
	fs.DurationVar(&cfg.RecoveryTimeout, "recovery-timeout", 0, "with --kill: how long to wait for detection and hand-back (default 2m + 3 leases)")
	fs.BoolVar(&cfg.ShutdownAtEnd, "shutdown-at-end", true, "send ShutdownWorker for every live worker when the load ends")
	fs.Float64Var(&cfg.Alternate, "alternate", 0, "alternate the offered load, phase after phase over the measured period, between the base rate (--interval) and this many times it, base first; each phase's goodput is reported apart, and their ratio: capacity and a multiple of it measured in the same minutes")
	fs.DurationVar(&cfg.AlternatePeriod, "alternate-period", bench.AlternatePeriodDefault, "length of one phase of --alternate")
	fs.DurationVar(&cfg.AlternateSettle, "alternate-settle", 0, "start of each --alternate phase left out of its figures, while the server drains the queue the last phase left (default: the RPC timeout, at most half a phase)")
	fs.IntVar(&cfg.RegisterBurst, "register-burst", 0, "new workers that send their first heartbeat at the same instant while the fleet heartbeats; the time until all are registered and the fleet's latency meanwhile are measured")
	fs.DurationVar(&cfg.RegisterBurstAt, "register-burst-at", 0, "when --register-burst fires, from the start (default: halfway through the measured period)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of jitter, churn and kill choices (0: random)")
	fs.StringVar(&jsonPath, "json", "", "write the summary as JSON to this file")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write the generator's own CPU profile to this file (its cost shares the cores on a small machine)")
	fs.StringVar(&memProfile, "memprofile", "", "write the generator's allocation profile to this file at the end")
	for _, f := range []string{"json", "cpuprofile", "memprofile"} {
		_ = cmd.MarkFlagFilename(f)
	}
	_ = cmd.RegisterFlagCompletionFunc("api", cobra.FixedCompletions([]string{string(bench.APIPublic), "liveness"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = runner(func(cmd *cobra.Command, _ []string) (retErr error) {
		stderr := cmd.ErrOrStderr()
		p, err := out.printer(cmd)
		if err != nil {
			return err
		}
		cfg.API = bench.API(api)
		if err := cfg.Validate(); err != nil {
			return usageError{err}
		}

		if cpuProfile != "" {
			f, err := os.Create(cpuProfile)
			if err == nil {
				err = pprof.StartCPUProfile(f)
			}
			if err != nil {
				return err
			}
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
		if memProfile != "" {
			defer func() {
				f, err := os.Create(memProfile)
				if err == nil {
					runtime.GC()
					err = pprof.Lookup("allocs").WriteTo(f, 0)
					f.Close()
				}
				if err != nil && retErr == nil {
					retErr = err
				}
			}()
		}

		if os.Getenv("GOGC") == "" {
			// The generator shares the machine with the server it measures; with thousands of
			// client goroutines, collecting at Go's default pace took a tenth of its CPU. Memory is
			// not what it measures of itself, so it collects less often.
			debug.SetGCPercent(benchGCPercent)
		}
		summary, err := bench.Run(cmd.Context(), cfg, stderr)
		if err != nil && summary.RPCs == 0 {
			return err
		}
		if err != nil {
			fmt.Fprintln(stderr, "vigil: bench stopped early:", err)
		}
		if werr := p.object(summary, summary.WriteText); werr != nil {
			return werr
		}
		if jsonPath != "" {
			data, jerr := json.MarshalIndent(summary, "", "  ")
			if jerr == nil {
				jerr = os.WriteFile(jsonPath, append(data, '\n'), 0o644)
			}
			if jerr != nil {
				return jerr
			}
		}
		if err != nil {
			return fmt.Errorf("bench stopped early: %w", err)
		}
		return nil
	})
	return cmd
}
