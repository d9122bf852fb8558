package bench

import (
	"sync/atomic"
	"time"
)

// Alternating load: capacity and a multiple of it, measured in the same run.
//
// Goodput at twice capacity is a ratio of two runs, and on a shared box the runs' speed moves
// by more than the ratio being measured, even within one hour. Alternated within
// one server process, phase after phase, both rates see the same minutes of the box, so what
// drifts falls on both alike and the ratio stands.
//
// With Alternate set to F, the measured period is cut into phases of AlternatePeriod: the
// first at the base rate (Interval), the next at F times it (each worker's interval divided
// by F), and so on. The first AlternateSettle of each phase is left out of the phase's
// figures, while the server drains (or builds) the queue the previous phase left; its
// heartbeats still count in the run's overall figures.

// phase is which half of an alternating run a moment falls in.
type phase int

const (
	phaseBase phase = iota
	phaseHigh
	numPhases
)

// phaseCounters count the heartbeats of each phase's settled part, by when they were due or
// sent.
type phaseCounters struct {
	offered, ok, failed [numPhases]atomic.Int64
}

// phaseAt says which phase t falls in and whether the phase has settled by then. Before the
// measured period, and without Alternate, every moment is an unsettled base phase.
func (r *runner) phaseAt(t time.Time) (p phase, settled bool) {
	if r.cfg.Alternate <= 0 || t.Before(r.measureFrom) {
		return phaseBase, false
	}
	since := t.Sub(r.measureFrom)
	n := since / r.cfg.AlternatePeriod
	p = phase(n % 2)
	return p, since-n*r.cfg.AlternatePeriod >= r.cfg.AlternateSettle
}

// intervalAt is a worker's interval between heartbeats at t: Interval, divided by Alternate in
// a high phase.
func (r *runner) intervalAt(t time.Time) time.Duration {
	if p, _ := r.phaseAt(t); p == phaseHigh {
		return time.Duration(float64(r.cfg.Interval) / r.cfg.Alternate)
	}
	return r.cfg.Interval
}

// countPhase adds n heartbeats due or sent at t to the counter of t's phase, if it has
// settled.
func (r *runner) countPhase(c *[numPhases]atomic.Int64, t time.Time, n int64) {
	if p, settled := r.phaseAt(t); settled {
		c[p].Add(n)
	}
}

// countOffered counts n heartbeat slots that came due at t: in the run's figures, and in its
// phase's if settled.
func (r *runner) countOffered(t time.Time, n int64) {
	r.cnt.offered.Add(n)
	r.countPhase(&r.phases.offered, t, n)
}

// settledTime is how long each phase was settled between the measured period's start and end.
func (r *runner) settledTime(end time.Time) (d [numPhases]time.Duration) {
	if r.cfg.Alternate <= 0 || !end.After(r.measureFrom) {
		return d
	}
	for from := r.measureFrom; from.Before(end); from = from.Add(r.cfg.AlternatePeriod) {
		p, _ := r.phaseAt(from)
		settledFrom := from.Add(r.cfg.AlternateSettle)
		until := from.Add(r.cfg.AlternatePeriod)
		if end.Before(until) {
			until = end
		}
		if until.After(settledFrom) {
			d[p] += until.Sub(settledFrom)
		}
	}
	return d
}

// AlternateSummary gives each phase's figures over its settled parts.
type AlternateSummary struct {
	Factor   float64    `json:"factor"`
	PeriodS  float64    `json:"period_s"`
	SettleS  float64    `json:"settle_s"`
	BaseS    float64    `json:"base_settled_s"`
	HighS    float64    `json:"high_settled_s"`
	BaseRate PhaseRates `json:"base"`
	HighRate PhaseRates `json:"high"`
	// HighToBase is the high phases' goodput over the base phases': with the base rate at the
	// box's capacity, goodput at Factor times it as a share of capacity.
	HighToBase float64 `json:"high_to_base"`
}

// PhaseRates are one phase's heartbeats a second.
type PhaseRates struct {
	OfferedPerS    float64 `json:"offered_per_s"`
	ThroughputPerS float64 `json:"throughput_per_s"`
	FailedPerS     float64 `json:"failed_per_s"`
}

func (r *runner) alternateSummary(end time.Time) *AlternateSummary {
	if r.cfg.Alternate <= 0 {
		return nil
	}
	d := r.settledTime(end)
	rates := func(p phase) PhaseRates {
		s := d[p].Seconds()
		if s <= 0 {
			return PhaseRates{}
		}
		return PhaseRates{
			OfferedPerS:    float64(r.phases.offered[p].Load()) / s,
			ThroughputPerS: float64(r.phases.ok[p].Load()) / s,
			FailedPerS:     float64(r.phases.failed[p].Load()) / s,
		}
	}
	a := &AlternateSummary{
		Factor: r.cfg.Alternate, PeriodS: r.cfg.AlternatePeriod.Seconds(), SettleS: r.cfg.AlternateSettle.Seconds(),
		BaseS: d[phaseBase].Seconds(), HighS: d[phaseHigh].Seconds(),
		BaseRate: rates(phaseBase), HighRate: rates(phaseHigh),
	}
	if a.BaseRate.ThroughputPerS > 0 {
		a.HighToBase = a.HighRate.ThroughputPerS / a.BaseRate.ThroughputPerS
	}
	return a
}
