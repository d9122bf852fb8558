package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary is the outcome of a run, as written to --json. Heartbeat counts are worker
// heartbeats (a public-API request of G workers carries G); latencies are per RPC, measured
// by the generator from send to reply.
type Summary struct {
	API              string  `json:"api"`
	Address          string  `json:"address"`
	Namespace        string  `json:"namespace"`
	Workers          int     `json:"workers"`
	WorkersPerClient int     `json:"workers_per_client"`
	Activities       int     `json:"activities"`
	IntervalS        float64 `json:"interval_s"`
	DurationS        float64 `json:"duration_s"`
	// WarmupS is the start of the load left out of every figure (--warmup).
	WarmupS      float64 `json:"warmup_s,omitempty"`
	ChurnPct     float64 `json:"churn_pct"`
	ChurnPeriodS float64 `json:"churn_period_s"`
	LeaseS       float64 `json:"lease_s"`
	Connections  int     `json:"connections"`
	// ElapsedS is how long the load ran: Duration, or longer while killed workers were watched.
	ElapsedS float64 `json:"elapsed_s"`

	HeartbeatsOffered int64 `json:"heartbeats_offered"` // slots that came due
	HeartbeatsSent    int64 `json:"heartbeats_sent"`
	HeartbeatsOK      int64 `json:"heartbeats_ok"`
	HeartbeatsFailed  int64 `json:"heartbeats_failed"`
	// HeartbeatsMissed are slots that passed whole while the client's previous RPC was out.
	HeartbeatsMissed int64   `json:"heartbeats_missed"`
	RPCs             int64   `json:"rpcs"`
	OfferedPerS      float64 `json:"offered_per_s"`
	ThroughputPerS   float64 `json:"throughput_per_s"` // successful heartbeats per second
	RPCsPerS         float64 `json:"rpcs_per_s"`

	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	MeanMs float64 `json:"mean_ms"`
	// ScheduleLag* are how late the generator sent heartbeats after they were due (timer and
	// scheduling delay in the generator itself, not the server). GeneratorBehind is set when
	// its p99 passed generatorBehindMs: the generator could not keep its own schedule, so the
	// figures above measure it as much as the server.
	ScheduleLagP50Ms float64 `json:"schedule_lag_p50_ms"`
	ScheduleLagP99Ms float64 `json:"schedule_lag_p99_ms"`
	ScheduleLagMaxMs float64 `json:"schedule_lag_max_ms"`
	GeneratorBehind  bool    `json:"generator_behind"`
	// Bind* are the latencies of the heartbeats that carried --activities bindings (a
	// worker's first), also counted above; absent without --activities.
	BindCount int64    `json:"bind_heartbeats,omitempty"`
	BindP50Ms *float64 `json:"bind_p50_ms,omitempty"`
	BindP99Ms *float64 `json:"bind_p99_ms,omitempty"`
	BindMaxMs *float64 `json:"bind_max_ms,omitempty"`

	// Errors counts failed heartbeat RPCs; ErrorsByCode splits them by gRPC code.
	Errors       int64            `json:"errors"`
	ErrorsByCode map[string]int64 `json:"errors_by_code"`
	// FirstErrors is the message of the first failed heartbeat RPC of each code.
	FirstErrors map[string]string `json:"first_errors,omitempty"`
	// RPCsRetried were answered after RetriesUnavailable retried Unavailable answers
	// (--retry-unavailable) and RetriesResourceExhausted retried refusals
	// (--retry-resource-exhausted); their latency includes the retries.
	RPCsRetried              int64 `json:"rpcs_retried,omitempty"`
	RetriesUnavailable       int64 `json:"retries_unavailable,omitempty"`
	RetriesResourceExhausted int64 `json:"retries_resource_exhausted,omitempty"`
	Churned                  int64 `json:"churned_clients"`
	Shutdowns                int64 `json:"shutdowns"`
	ShutdownErrors           int64 `json:"shutdown_errors"`

	Kill *KillSummary `json:"kill,omitempty"`
	// Alternate gives the phases of an alternating run (--alternate) apart.
	Alternate *AlternateSummary `json:"alternate,omitempty"`
	// Burst describes the registration burst (--register-burst); BurstAllRegisteredMs is its
	// time until the last of its workers was registered, absent when not all were.
	Burst                *BurstSummary `json:"burst,omitempty"`
	BurstAllRegisteredMs *float64      `json:"burst_all_registered_ms,omitempty"`
	// Top-level copies of the kill figures; absent without --kill or when not every killed
	// worker was seen through before the recovery timeout.
	DetectionP99Ms  *float64 `json:"detection_p99_ms,omitempty"`
	RedispatchAllMs *float64 `json:"redispatch_all_ms,omitempty"`

	Server *ProcStats `json:"server,omitempty"`
	// Cost is the server's CPU time per heartbeat (and per registration) over the steady
	// window; with --server-pid only.
	Cost *CostSummary `json:"cost,omitempty"`
	// ServerAtLoadEnd holds server counters (worker_lease_expiries, worker_resurrections) read
	// from --metrics-url as the load ended, before the shutdowns.
	ServerAtLoadEnd map[string]float64 `json:"server_at_load_end,omitempty"`
	Generator       *ProcStats         `json:"generator,omitempty"`
}

// KillSummary describes what happened to the killed workers. Detection is measured from each
// worker's lease deadline, so the lease itself (which the operator chooses) is not counted.
type KillSummary struct {
	Killed           int   `json:"killed"`
	Detected         int   `json:"detected"`
	HandedBack       int   `json:"handed_back"`
	ActivitiesAtKill int64 `json:"activities_at_kill"`
	// Observed: first DescribeWorkerLiveness reply showing INACTIVE − lease deadline. Its
	// resolution is the poll interval.
	DetectionP50Ms float64 `json:"detection_p50_ms"`
	DetectionP99Ms float64 `json:"detection_p99_ms"`
	DetectionMaxMs float64 `json:"detection_max_ms"`
	// Server: the record's inactive_time − lease deadline (no poll resolution).
	DetectionServerP50Ms float64 `json:"detection_server_p50_ms"`
	DetectionServerMaxMs float64 `json:"detection_server_max_ms"`
	// RedispatchAllMs: the slowest worker's (reply showing INACTIVE with 0 bound activities −
	// its lease deadline).
	RedispatchAllMs float64 `json:"redispatch_all_ms"`
	// RecoveryAllMs: from the kill until the last worker's activities were handed back (and,
	// with --metrics-url, the server's outbound backlog was empty); includes the lease.
	RecoveryAllMs float64 `json:"recovery_all_ms"`
	// BacklogDrainedMs: from the last detection until the outbound backlog was seen empty
	// (--metrics-url only).
	BacklogDrainedMs *float64 `json:"backlog_drained_ms,omitempty"`
	PollIntervalMs   float64  `json:"poll_interval_ms"`
	TimedOut         bool     `json:"timed_out"`
	Notes            []string `json:"notes,omitempty"`
}

func (r *runner) summary(start, end time.Time, k *killWatch) Summary {
	cfg := r.cfg
	elapsed := end.Sub(start).Seconds()
	lat := r.lat.snapshot()
	s := Summary{
		API:                      string(cfg.API),
		Address:                  cfg.Address,
		Namespace:                cfg.Namespace,
		Workers:                  cfg.Workers,
		WorkersPerClient:         cfg.WorkersPerClient,
		Activities:               cfg.Activities,
		IntervalS:                cfg.Interval.Seconds(),
		DurationS:                cfg.Duration.Seconds(),
		WarmupS:                  cfg.Warmup.Seconds(),
		ChurnPct:                 cfg.Churn,
		ChurnPeriodS:             cfg.ChurnPeriod.Seconds(),
		LeaseS:                   cfg.Lease.Seconds(),
		Connections:              cfg.Connections,
		ElapsedS:                 elapsed,
		HeartbeatsOffered:        r.cnt.offered.Load(),
		HeartbeatsSent:           r.cnt.sent.Load(),
		HeartbeatsOK:             r.cnt.ok.Load(),
		HeartbeatsFailed:         r.cnt.failed.Load(),
		HeartbeatsMissed:         r.cnt.missed.Load(),
		RPCs:                     r.cnt.rpcs.Load(),
		P50Ms:                    lat.p50,
		P90Ms:                    lat.p90,
		P95Ms:                    lat.p95,
		P99Ms:                    lat.p99,
		P999Ms:                   lat.p999,
		MaxMs:                    lat.max,
		MeanMs:                   lat.mean,
		Errors:                   r.cnt.rpcErrors.Load(),
		ErrorsByCode:             r.cnt.errorsByCode(),
		FirstErrors:              r.cnt.firstErrors(),
		RPCsRetried:              r.cnt.retried.Load(),
		RetriesUnavailable:       r.cnt.retries.Load(),
		RetriesResourceExhausted: r.cnt.retriesRefused.Load(),
		Churned:                  r.cnt.churned.Load(),
		Shutdowns:                r.cnt.shutdowns.Load(),
		ShutdownErrors:           r.cnt.shutdownErrors.Load(),
	}
	lag := r.lag.snapshot()
	s.ScheduleLagP50Ms, s.ScheduleLagP99Ms, s.ScheduleLagMaxMs = lag.p50, lag.p99, lag.max
	s.GeneratorBehind = s.generatorBehind()
	if s.ErrorsByCode == nil {
		s.ErrorsByCode = map[string]int64{}
	}
	if bind := r.bindLat.snapshot(); bind.count > 0 {
		s.BindCount, s.BindP50Ms, s.BindP99Ms, s.BindMaxMs = bind.count, &bind.p50, &bind.p99, &bind.max
	}
	if elapsed > 0 {
		s.OfferedPerS = float64(s.HeartbeatsOffered) / elapsed
		s.ThroughputPerS = float64(s.HeartbeatsOK) / elapsed
		s.RPCsPerS = float64(s.RPCs) / elapsed
	}
	s.Alternate = r.alternateSummary(r.measureFrom.Add(cfg.Duration - cfg.Warmup))
	if k != nil {
		ks := k.summary()
		s.Kill = &ks
		if !ks.TimedOut && ks.HandedBack == ks.Killed && ks.Killed > 0 {
			s.DetectionP99Ms = &ks.DetectionP99Ms
			s.RedispatchAllMs = &ks.RedispatchAllMs
		}
	}
	return s
}

func (k *killWatch) summary() KillSummary {
	k.mu.Lock()
	defer k.mu.Unlock()
	ks := KillSummary{
		Killed:         len(k.victims),
		TimedOut:       k.timedOut,
		PollIntervalMs: ms(k.r.cfg.PollInterval),
	}
	var observed, server []float64
	var lastDetected, lastHandedBack time.Time
	unknown := 0
	for _, v := range k.victims {
		ks.ActivitiesAtKill += v.boundAtKill
		if v.detectedAt.IsZero() {
			if v.lastErr != nil {
				ks.Notes = append(ks.Notes, fmt.Sprintf("worker %s: %v", v.key, v.lastErr))
			}
			continue
		}
		ks.Detected++
		if v.leaseDeadline.IsZero() {
			// No heartbeat of it was ever accepted (an overloaded server refused them all):
			// there is no lease to measure its detection from.
			unknown++
			continue
		}
		observed = append(observed, ms(v.detectedAt.Sub(v.leaseDeadline)))
		if !v.inactiveTime.IsZero() {
			server = append(server, ms(v.inactiveTime.Sub(v.leaseDeadline)))
		}
		lastDetected = later(lastDetected, v.detectedAt)
		if v.handedBackAt.IsZero() {
			continue
		}
		ks.HandedBack++
		ks.RedispatchAllMs = max(ks.RedispatchAllMs, ms(v.handedBackAt.Sub(v.leaseDeadline)))
		lastHandedBack = later(lastHandedBack, v.handedBackAt)
	}
	ks.DetectionP50Ms, ks.DetectionP99Ms, ks.DetectionMaxMs = percentile(observed, 50), percentile(observed, 99), percentile(observed, 100)
	ks.DetectionServerP50Ms, ks.DetectionServerMaxMs = percentile(server, 50), percentile(server, 100)
	if !k.backlogEmptyAt.IsZero() {
		d := ms(k.backlogEmptyAt.Sub(lastDetected))
		ks.BacklogDrainedMs = &d
		lastHandedBack = later(lastHandedBack, k.backlogEmptyAt)
	}
	if k.backlogErr != nil && k.backlogEmptyAt.IsZero() {
		ks.Notes = append(ks.Notes, "outbound backlog: "+k.backlogErr.Error())
	}
	if !lastHandedBack.IsZero() {
		ks.RecoveryAllMs = ms(lastHandedBack.Sub(k.killedAt))
	}
	if unknown > 0 {
		ks.Notes = append(ks.Notes, fmt.Sprintf("%d killed workers never had a heartbeat accepted (no lease): left out of the detection times", unknown))
	}
	if ks.Detected < ks.Killed {
		ks.Notes = append(ks.Notes, fmt.Sprintf("%d of %d killed workers never seen INACTIVE", ks.Killed-ks.Detected, ks.Killed))
	}
	return ks
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// percentile is the nearest-rank percentile of a small sample (q in (0, 100]); 0 when empty.
func percentile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := int(math.Ceil(q / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// WriteText writes the summary as a table for people.
func (s Summary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(name, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{name}, args...)...)
	}
	row("api", "%s (%d workers, %d per client, %d connections)", s.API, s.Workers, s.WorkersPerClient, s.Connections)
	row("load", "heartbeat every %gs ±10%%, %d activities/worker, churn %g%% per %gs, lease %s",
		s.IntervalS, s.Activities, s.ChurnPct, s.ChurnPeriodS, leaseText(s.LeaseS))
	if s.WarmupS > 0 {
		row("elapsed", "%.1f s measured after a %g s warm-up (duration %g s)", s.ElapsedS, s.WarmupS, s.DurationS)
	} else {
		row("elapsed", "%.1f s (duration %g s)", s.ElapsedS, s.DurationS)
	}
	row("offered", "%.1f heartbeats/s (%d due, %d missed while the previous RPC was out)", s.OfferedPerS, s.HeartbeatsOffered, s.HeartbeatsMissed)
	row("throughput", "%.1f heartbeats/s ok (%d ok of %d sent, %.1f RPC/s)", s.ThroughputPerS, s.HeartbeatsOK, s.HeartbeatsSent, s.RPCsPerS)
	row("latency ms", "p50 %.2f  p90 %.2f  p95 %.2f  p99 %.2f  p99.9 %.2f  max %.2f  mean %.2f",
		s.P50Ms, s.P90Ms, s.P95Ms, s.P99Ms, s.P999Ms, s.MaxMs, s.MeanMs)
	if s.BindCount > 0 {
		row("binding ms", "%d heartbeats with %d bindings each: p50 %.2f  p99 %.2f  max %.2f",
			s.BindCount, s.Activities, *s.BindP50Ms, *s.BindP99Ms, *s.BindMaxMs)
	}
	row("errors", "%d RPCs%s", s.Errors, codesText(s.ErrorsByCode))
	for _, code := range slices.Sorted(maps.Keys(s.FirstErrors)) {
		row("first error", "%s: %s", code, s.FirstErrors[code])
	}
	if s.RPCsRetried > 0 {
		row("retried", "%d RPCs answered after %d retried Unavailable and %d retried ResourceExhausted",
			s.RPCsRetried, s.RetriesUnavailable, s.RetriesResourceExhausted)
	}
	if a := s.Alternate; a != nil {
		for _, ph := range []struct {
			name string
			secs float64
			r    PhaseRates
		}{{"base phases", a.BaseS, a.BaseRate}, {fmt.Sprintf("%gx phases", a.Factor), a.HighS, a.HighRate}} {
			row(ph.name, "%.1f heartbeats/s ok of %.1f offered, %.1f failed (%g s settled)", ph.r.ThroughputPerS, ph.r.OfferedPerS, ph.r.FailedPerS, ph.secs)
		}
		row("alternate", "%gx phases carried %.1f %% of the base phases' goodput (phases of %g s, the first %g s of each left out)",
			a.Factor, 100*a.HighToBase, a.PeriodS, a.SettleS)
	}
	if s.Shutdowns > 0 {
		row("churn", "%d client restarts, %d ShutdownWorker calls (%d failed)", s.Churned, s.Shutdowns, s.ShutdownErrors)
	}
	if b := s.Burst; b != nil {
		all := "not all registered before the load ended"
		if b.AllRegisteredMs != nil {
			all = fmt.Sprintf("all registered %.0f ms after the burst", *b.AllRegisteredMs)
		}
		row("burst", "%d new workers at %.1f s: %d registered, %s", b.Workers, b.AtS, b.Registered, all)
		row("burst register ms", "p50 %.0f  p99 %.0f  max %.0f (from the burst to its OK, retries included)", b.RegisterP50Ms, b.RegisterP99Ms, b.RegisterMaxMs)
		row("burst attempts", "%d RPCs, %d refused (ResourceExhausted), %d workers retried%s", b.Attempts, b.Refused, b.RetriedWorkers, codesText(b.ErrorsByCode))
		row("fleet in burst ms", "%d heartbeats in the %.1f s window: p50 %.2f  p99 %.2f  max %.2f", b.During.Count, b.WindowS, b.During.P50Ms, b.During.P99Ms, b.During.MaxMs)
		row("fleet otherwise ms", "%d heartbeats: p50 %.2f  p99 %.2f  max %.2f", b.Outside.Count, b.Outside.P50Ms, b.Outside.P99Ms, b.Outside.MaxMs)
	}
	if k := s.Kill; k != nil {
		row("killed", "%d workers, %d bound activities; %d detected, %d handed back%s", k.Killed, k.ActivitiesAtKill, k.Detected, k.HandedBack, timedOutText(k.TimedOut))
		row("detection ms", "observed p50 %.0f  p99 %.0f  max %.0f (poll %.0f ms); server p50 %.0f  max %.0f (after the lease deadline)",
			k.DetectionP50Ms, k.DetectionP99Ms, k.DetectionMaxMs, k.PollIntervalMs, k.DetectionServerP50Ms, k.DetectionServerMaxMs)
		row("hand-back ms", "all handed back %.0f after their lease deadline; %.0f after the kill", k.RedispatchAllMs, k.RecoveryAllMs)
		if k.BacklogDrainedMs != nil {
			row("backlog ms", "outbound backlog empty %.0f after the last detection", *k.BacklogDrainedMs)
		}
		for _, n := range k.Notes {
			row("note", "%s", n)
		}
	}
	for _, p := range []struct {
		name string
		ps   *ProcStats
	}{{"server", s.Server}, {"generator", s.Generator}} {
		if p.ps == nil {
			continue
		}
		if p.ps.Error != "" && p.ps.Samples == 0 {
			row(p.name, "pid %d: %s", p.ps.PID, p.ps.Error)
			continue
		}
		row(p.name, "pid %d: max RSS %.1f MiB, CPU mean %.0f%% max %.0f%% (of one core)", p.ps.PID, p.ps.MaxRSSMiB, p.ps.MeanCPUPct, p.ps.MaxCPUPct)
	}
	if c := s.Cost; c != nil {
		w := c.Steady
		row("server cost", "%.1f µs CPU per heartbeat: %.0f ms over %d heartbeats ok from %.1f to %.1f s (%.0f%% of one core)",
			c.CPUPerHeartbeatUs, w.ServerCPUMs, w.HeartbeatsOK, w.FromS, w.ToS, w.ServerCPUPct)
		if c.StorePID > 0 {
			row("store cost", "%.1f µs CPU per heartbeat in the store (pid %d and its children): %.0f ms over the same window; server and store together %.1f µs",
				c.StoreCPUPerHeartbeatUs, c.StorePID, w.StoreCPUMs, c.CPUPerHeartbeatUs+c.StoreCPUPerHeartbeatUs)
		}
		if r := c.Registrations; r != nil && c.CPUPerRegistrationUs != nil {
			row("registration cost", "%.1f µs CPU per registration: %.0f ms over %d registrations and %d other heartbeats from %.1f to %.1f s (%s)",
				*c.CPUPerRegistrationUs, r.ServerCPUMs, r.RegistrationsOK, r.HeartbeatsOK-r.RegistrationsOK, r.FromS, r.ToS, c.RegistrationBasis)
		}
		for _, n := range c.Notes {
			row("cost note", "%s", n)
		}
	}
	row("schedule lag ms", "p50 %.2f  p99 %.2f  max %.2f (heartbeats sent after they were due, by the generator itself)",
		s.ScheduleLagP50Ms, s.ScheduleLagP99Ms, s.ScheduleLagMaxMs)
	if s.generatorBehind() {
		row("warning", "the generator fell behind its own schedule (p99 %.0f ms late): these figures measure it as much as the server; run fewer workers or give it a core of its own", s.ScheduleLagP99Ms)
	}
	return tw.Flush()
}

// generatorBehindMs is the schedule lag (p99) past which a run is flagged: a timer on an
// unloaded generator fires within a millisecond or two of its time.
const generatorBehindMs = 100

func (s Summary) generatorBehind() bool { return s.ScheduleLagP99Ms > generatorBehindMs }

func leaseText(s float64) string {
	if s == 0 {
		return "server's choice"
	}
	return fmt.Sprintf("%gs", s)
}

func timedOutText(timedOut bool) string {
	if timedOut {
		return " (recovery timeout reached)"
	}
	return ""
}

func codesText(byCode map[string]int64) string {
	if len(byCode) == 0 {
		return ""
	}
	codes := slices.SortedFunc(maps.Keys(byCode), func(a, b string) int { return cmp.Compare(byCode[b], byCode[a]) })
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s %d", c, byCode[c])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
