package bench

import (
	"fmt"
	"sync"
	"time"
)

// The server's CPU time per heartbeat.
//
// A server's cost is what it spends per heartbeat at a rate it carries, not how many it carries
// at capacity: a fleet below capacity pays for its heartbeats in cores. It is read over a
// window of steady load, as the server's utime+stime (/proc/PID/stat of --server-pid) at the
// window's two ends, divided by the worker heartbeats answered OK between the same two
// instants. Each end reads the answer counters and the server's ticks together, so the CPU and
// the heartbeats it paid for cover the same time whatever the sampler's own delays; heartbeats
// are counted when answered, which is when the server has spent what they cost.
//
// A registration (the first heartbeat of a worker key: a durable create where an ordinary
// heartbeat is an update) is read in a window of its own that is mostly registrations: the
// window's CPU less its ordinary heartbeats at the steady window's cost per heartbeat, divided
// by its registrations. That window is the
// registration burst (--register-burst) from its start to its last registration, or else the
// fleet's own registrations, from the start until the last of its workers was answered, when
// that came within the warm-up (and before the first --churn restart), so that the window does
// not overlap the steady one.
//
// With --store-pid, the store's processes are read at the same instants: a PostgreSQL server
// spends CPU of its own for every heartbeat vigil writes, in processes vigil's counters do not
// see. The store's CPU per heartbeat is reported beside the server's, over the steady window.

// costReading is what one end of a window reads.
type costReading struct {
	at    time.Time
	ticks float64 // the server's utime+stime, in USER_HZ ticks
	// storeTicks is the store's process tree's (readTreeCPUTicks), with --store-pid.
	storeTicks float64
	// ok counts the worker heartbeats answered OK since the start (registrations and the
	// burst's workers included, warm-up too); reg counts the registrations among them.
	ok, reg   int64
	shutdowns int64
}

// CostWindow is what the server spent over one window of the run.
type CostWindow struct {
	// FromS and ToS bound the window, in seconds from the start of the load (warm-up
	// included).
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	// ServerCPUMs is the server's utime+stime over the window; ServerCPUPct the same as a
	// share of one core.
	ServerCPUMs  float64 `json:"server_cpu_ms"`
	ServerCPUPct float64 `json:"server_cpu_pct"`
	// StoreCPUMs is the store's processes' utime+stime over the window (--store-pid).
	StoreCPUMs float64 `json:"store_cpu_ms,omitempty"`
	// HeartbeatsOK are the worker heartbeats answered OK in the window, RegistrationsOK
	// included; Shutdowns the ShutdownWorker calls sent in it.
	HeartbeatsOK    int64 `json:"heartbeats_ok"`
	RegistrationsOK int64 `json:"registrations_ok"`
	Shutdowns       int64 `json:"shutdowns"`
}

// CostSummary is the server's CPU per heartbeat (--server-pid): over the steady window, and
// per registration where the run has a window of registrations.
type CostSummary struct {
	// Steady is the window from the end of the warm-up over --cpu-window.
	Steady CostWindow `json:"steady"`
	// CPUPerHeartbeatUs is Steady's CPU divided by its heartbeats answered OK. With --churn
	// the window holds registrations and shutdowns too, and the figure is their blend.
	CPUPerHeartbeatUs float64 `json:"cpu_us_per_heartbeat"`
	// StorePID is the store's process (--store-pid), zero without; StoreCPUPerHeartbeatUs is
	// Steady's CPU of that process and its children divided by the same heartbeats.
	StorePID               int     `json:"store_pid,omitempty"`
	StoreCPUPerHeartbeatUs float64 `json:"store_cpu_us_per_heartbeat,omitempty"`
	// Registrations is the window of registrations (RegistrationBasis: "burst" or "fleet
	// start"); CPUPerRegistrationUs the CPU per registration in it, its ordinary heartbeats
	// counted at CPUPerHeartbeatUs.
	Registrations        *CostWindow `json:"registrations,omitempty"`
	RegistrationBasis    string      `json:"registration_basis,omitempty"`
	CPUPerRegistrationUs *float64    `json:"cpu_us_per_registration,omitempty"`
	// TickMs is the resolution of the CPU readings (one USER_HZ tick at each end).
	TickMs float64  `json:"tick_ms"`
	Notes  []string `json:"notes,omitempty"`
}

// costWindow is the window between two readings; start is the start of the load.
func costWindow(start time.Time, from, to costReading) CostWindow {
	w := CostWindow{
		FromS:           from.at.Sub(start).Seconds(),
		ToS:             to.at.Sub(start).Seconds(),
		ServerCPUMs:     (to.ticks - from.ticks) * 1000 / clockTicksPerSecond,
		StoreCPUMs:      (to.storeTicks - from.storeTicks) * 1000 / clockTicksPerSecond,
		HeartbeatsOK:    to.ok - from.ok,
		RegistrationsOK: to.reg - from.reg,
		Shutdowns:       to.shutdowns - from.shutdowns,
	}
	if d := to.at.Sub(from.at); d > 0 {
		w.ServerCPUPct = 100 * w.ServerCPUMs / ms(d)
	}
	return w
}

// perHeartbeatUs is a window's CPU per heartbeat answered OK, in microseconds; ok is false
// when none was.
func (w CostWindow) perHeartbeatUs() (us float64, ok bool) {
	if w.HeartbeatsOK <= 0 {
		return 0, false
	}
	return w.ServerCPUMs * 1000 / float64(w.HeartbeatsOK), true
}

// perRegistrationUs is a registration window's CPU per registration, once its ordinary
// heartbeats are counted at heartbeatUs each; ok is false when the window holds no
// registration.
func (w CostWindow) perRegistrationUs(heartbeatUs float64) (us float64, ok bool) {
	if w.RegistrationsOK <= 0 {
		return 0, false
	}
	ordinary := float64(w.HeartbeatsOK - w.RegistrationsOK)
	return (w.ServerCPUMs*1000 - ordinary*heartbeatUs) / float64(w.RegistrationsOK), true
}

// costMeter takes the readings of a run's windows, by name. Its methods do nothing on a nil
// meter (a run without --server-pid).
type costMeter struct {
	r        *runner
	pid      int
	storePID int // zero: no store to read
	start    time.Time

	mu       sync.Mutex
	readings map[string]costReading
	err      error
	// scheduled are the readings to take at their time; pending counts those not taken or
	// cancelled yet, so that stop waits for one already under way.
	scheduled []scheduledReading
	pending   sync.WaitGroup
}

type scheduledReading struct {
	name  string
	at    time.Time
	timer *time.Timer
}

// The readings' names.
const (
	readStart          = "start"
	readFleetStarted   = "fleet registered"
	readSteadyFrom     = "steady from"
	readSteadyTo       = "steady to"
	readBurst          = "burst"
	readBurstFinished  = "burst registered"
	fleetStartBasis    = "fleet start"
	registerBurstBasis = "burst"
)

// startCostMeter reads the start now and schedules the other readings of the run started at
// start.
func startCostMeter(r *runner, pid int, start time.Time) *costMeter {
	m := &costMeter{r: r, pid: pid, storePID: r.cfg.StorePID, start: start, readings: map[string]costReading{}}
	m.read(readStart)
	cfg := r.cfg
	at := func(name string, d time.Duration) {
		m.pending.Add(1)
		t := time.AfterFunc(time.Until(start.Add(d)), func() {
			defer m.pending.Done()
			m.read(name)
		})
		m.scheduled = append(m.scheduled, scheduledReading{name: name, at: start.Add(d), timer: t})
	}
	from, to := cfg.steadyWindow()
	at(readSteadyFrom, from)
	at(readSteadyTo, to)
	return m
}

// fleetRegistrationDeadline is how long from the start the fleet's own registrations may take
// to make a window of registrations: the warm-up, or until the first restart with churn.
func fleetRegistrationDeadline(cfg Config) time.Duration {
	d := cfg.Warmup
	if cfg.Churn > 0 {
		d = min(d, cfg.ChurnPeriod)
	}
	return d
}

// steadyWindow is the steady window's bounds from the start: from the end of the warm-up over
// CPUWindow, or by default until the load ends (or the registration burst starts). cfg has its
// defaults.
func (c Config) steadyWindow() (from, to time.Duration) {
	to = c.Duration
	if c.RegisterBurst > 0 {
		to = c.RegisterBurstAt
	}
	if c.CPUWindow > 0 {
		to = c.Warmup + c.CPUWindow
	}
	return c.Warmup, to
}

// read takes the reading name now: the answer counters and the server's ticks together.
func (m *costMeter) read(name string) {
	if m == nil {
		return
	}
	rd := costReading{
		ok:        m.r.cnt.answeredOK.Load(),
		reg:       m.r.cnt.registeredOK.Load(),
		shutdowns: m.r.cnt.shutdowns.Load(),
	}
	ticks, err := readCPUTicks(m.pid)
	if m.storePID > 0 && err == nil {
		rd.storeTicks, err = readTreeCPUTicks(m.storePID)
	}
	rd.at, rd.ticks = time.Now(), ticks
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.err = fmt.Errorf("reading %s: %w", name, err)
		return
	}
	m.readings[name] = rd
}

// stop cancels the readings whose time has not come and returns the summary of what was
// read. A reading whose time has come but whose timer has not fired yet (the steady window
// ends with the load by default, and the two timers race) is taken now.
func (m *costMeter) stop() *CostSummary {
	if m == nil {
		return nil
	}
	for _, sr := range m.scheduled {
		if sr.timer.Stop() {
			if !time.Now().Before(sr.at) {
				m.read(sr.name)
			}
			m.pending.Done()
		}
	}
	m.pending.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return costSummary(m.start, m.readings, fleetRegistrationDeadline(m.r.cfg), m.storePID, m.err)
}

// costSummary computes the windows from the readings taken; nil without a steady window.
// fleetDeadline is fleetRegistrationDeadline; storePID the store's process, zero without.
func costSummary(start time.Time, readings map[string]costReading, fleetDeadline time.Duration, storePID int, readErr error) *CostSummary {
	from, okFrom := readings[readSteadyFrom]
	to, okTo := readings[readSteadyTo]
	if !okFrom || !okTo {
		return nil
	}
	s := &CostSummary{Steady: costWindow(start, from, to), TickMs: 1000.0 / clockTicksPerSecond}
	perHB, ok := s.Steady.perHeartbeatUs()
	if !ok {
		s.Notes = append(s.Notes, "no heartbeat was answered OK in the steady window")
		return s
	}
	s.CPUPerHeartbeatUs = perHB
	if storePID > 0 {
		s.StorePID = storePID
		s.StoreCPUPerHeartbeatUs = s.Steady.StoreCPUMs * 1000 / float64(s.Steady.HeartbeatsOK)
	}
	if s.Steady.RegistrationsOK > 0 || s.Steady.Shutdowns > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("the steady window holds %d registrations and %d shutdowns: its CPU per heartbeat is their blend with ordinary heartbeats",
			s.Steady.RegistrationsOK, s.Steady.Shutdowns))
	}
	var regFrom, regTo costReading
	if burst, fired := readings[readBurst]; fired {
		if finished, ok := readings[readBurstFinished]; ok {
			regFrom, regTo, s.RegistrationBasis = burst, finished, registerBurstBasis
		} else {
			s.Notes = append(s.Notes, "the burst's workers were not all registered before the load ended: no CPU per registration")
		}
	} else if a, b := readings[readStart], readings[readFleetStarted]; !a.at.IsZero() && !b.at.IsZero() && !b.at.After(start.Add(fleetDeadline)) {
		regFrom, regTo, s.RegistrationBasis = a, b, fleetStartBasis
	} else if fleetDeadline > 0 {
		s.Notes = append(s.Notes, "the fleet's workers were not all registered within the warm-up (or before the first restart): no CPU per registration")
	}
	if s.RegistrationBasis != "" {
		w := costWindow(start, regFrom, regTo)
		s.Registrations = &w
		if us, ok := w.perRegistrationUs(perHB); ok {
			s.CPUPerRegistrationUs = &us
		}
	}
	if readErr != nil {
		s.Notes = append(s.Notes, readErr.Error())
	}
	return s
}

// countAnswered counts the client's heartbeat just answered OK: one per worker, and a
// registration for each worker it was the first OK of.
func (r *runner) countAnswered(c *simClient) {
	reg := int64(0)
	for _, w := range c.workers {
		if !w.answered {
			w.answered = true
			reg++
		}
	}
	r.cnt.answeredOK.Add(int64(len(c.workers)))
	if reg == 0 {
		return
	}
	// The fleet's own registrations end with the last of its workers' first answers.
	if total := r.cnt.registeredOK.Add(reg); total >= int64(r.cfg.Workers) && total-reg < int64(r.cfg.Workers) {
		r.cost.read(readFleetStarted)
	}
}
