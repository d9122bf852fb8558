package main

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/bench"
)

// costServers are the servers of the cost scenario, in the order of its table: the name in
// its runs' file names (cost-NAME-ROUND.json) and the row's label.
var costServers = []struct{ name, label string }{
	{"vigil", "vigil (SQLite)"},
	{"vigil-pg", "vigil (PostgreSQL), with PostgreSQL's own CPU"},
	{"floor-sqlite", "floor: gRPC + SQLite group commit"},
	{"floor-sqlite-log", "floor: gRPC + SQLite group commit, append-only log"},
	{"floor", "floor: gRPC only"},
	{"peer", "stock Temporal"},
	{"vigil-written", "vigil (SQLite), every heartbeat written"},
	{"floor-sqlite-written", "floor: gRPC + SQLite group commit, on the same fleet"},
	{"floor-sqlite-log-written", "floor: gRPC + SQLite group commit, append-only log, on the same fleet"},
}

// costRatios are the ratios of the cost scenario's second table, one server over another
// round by round: vigil over each floor and stock Temporal, and, where every heartbeat is
// written, the append-only log floor over the upsert floor.
var costRatios = []struct{ of, over, label string }{
	{"vigil", "floor", "vigil ÷ gRPC floor"},
	{"vigil", "floor-sqlite", "vigil ÷ gRPC + SQLite floor"},
	{"vigil", "peer", "vigil ÷ stock Temporal"},
	{"vigil-written", "floor-sqlite-written", "every heartbeat written: vigil ÷ gRPC + SQLite floor"},
	{"floor-sqlite-log-written", "floor-sqlite-written", "every heartbeat written: append-only log floor ÷ upsert floor"},
}

var costRun = regexp.MustCompile(`^cost-(.+)-(\d+)$`)

// costRounds files the cost scenario's runs by server and round.
func costRounds(runs map[string]*bench.Summary) map[string]map[int]*bench.Summary {
	out := map[string]map[int]*bench.Summary{}
	for name, s := range runs {
		m := costRun.FindStringSubmatch(name)
		if m == nil || s.Cost == nil || s.Cost.CPUPerHeartbeatUs <= 0 {
			continue
		}
		round, _ := strconv.Atoi(m[2])
		if out[m[1]] == nil {
			out[m[1]] = map[int]*bench.Summary{}
		}
		out[m[1]][round] = s
	}
	return out
}

// spread is a sample's median and range.
type spread struct {
	n                int
	median, min, max float64
}

func spreadOf(values []float64) spread {
	if len(values) == 0 {
		return spread{}
	}
	v := slices.Sorted(slices.Values(values))
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return spread{n: len(v), median: med, min: v[0], max: v[len(v)-1]}
}

// text is "median (min–max)" with f formatting each figure.
func (s spread) text(f func(float64) string, bold bool) string {
	med := f(s.median)
	if bold {
		med = "**" + med + "**"
	}
	if s.n < 2 {
		return med
	}
	return fmt.Sprintf("%s (%s–%s)", med, f(s.min), f(s.max))
}

func us(v float64) string { return num(v) + " µs" }

func times(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "×" }

// collect applies f to every run of a server, in round order.
func collect(byRound map[int]*bench.Summary, f func(*bench.Summary) (float64, bool)) []float64 {
	var out []float64
	for _, round := range slices.Sorted(maps.Keys(byRound)) {
		if v, ok := f(byRound[round]); ok {
			out = append(out, v)
		}
	}
	return out
}

// renderCost is the cost scenario's tables: each server's CPU per heartbeat over its runs,
// then vigil's over each other server's in the same round, which ran in the same minutes.
func renderCost(runs map[string]*bench.Summary) string {
	rounds := costRounds(runs)
	if len(rounds) == 0 {
		return ""
	}
	var b strings.Builder
	var short []string // servers that did not carry the offered rate
	b.WriteString("| server | runs | CPU per heartbeat | CPU per registration | p50 | p99 | ok/s | errors | server CPU |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, srv := range costServers {
		byRound := rounds[srv.name]
		if len(byRound) == 0 {
			continue
		}
		// A server on a store of processes of its own (PostgreSQL) costs what both spent.
		cpu := spreadOf(collect(byRound, func(s *bench.Summary) (float64, bool) {
			return s.Cost.CPUPerHeartbeatUs + s.Cost.StoreCPUPerHeartbeatUs, true
		}))
		reg := spreadOf(collect(byRound, func(s *bench.Summary) (float64, bool) {
			if s.Cost.CPUPerRegistrationUs == nil {
				return 0, false
			}
			return *s.Cost.CPUPerRegistrationUs, true
		}))
		regText := "–"
		if reg.n > 0 {
			regText = reg.text(us, false)
		}
		p50 := spreadOf(collect(byRound, func(s *bench.Summary) (float64, bool) { return s.P50Ms, true }))
		p99 := spreadOf(collect(byRound, func(s *bench.Summary) (float64, bool) { return s.P99Ms, true }))
		okps := spreadOf(collect(byRound, func(s *bench.Summary) (float64, bool) { return s.ThroughputPerS, true }))
		offered := spreadOf(collect(byRound, func(s *bench.Summary) (float64, bool) { return s.OfferedPerS, true }))
		if okps.median < 0.98*offered.median {
			short = append(short, fmt.Sprintf("%s carried %s of the %s heartbeats/s offered", srv.label, num(okps.median), num(offered.median)))
		}
		errs := 0.0
		for _, s := range byRound {
			errs += float64(s.Errors)
		}
		cpuPct := spreadOf(collect(byRound, func(s *bench.Summary) (float64, bool) { return s.Cost.Steady.ServerCPUPct, true }))
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", srv.label, len(byRound), cpu.text(us, true), regText,
			p50.text(ms, false), p99.text(ms, false), num(okps.median), num(errs), cpuPct.text(pct, false))
	}
	b.WriteString("\nEach figure is the median of the runs, with their range; errors are summed over the runs; server CPU is the share of one core over the window.")
	if len(rounds["vigil-pg"]) > 0 {
		b.WriteString(" On PostgreSQL, the CPU per heartbeat is vigil's and PostgreSQL's processes' together (vigil bench --store-pid); the CPU per registration and the server CPU are vigil's alone.")
	}
	b.WriteString("\n")
	if len(short) > 0 {
		b.WriteString("\n**Not below capacity**: " + strings.Join(short, "; ") + " (medians): its figures are those of a server at its limit on that core, in those minutes.\n")
	}
	var ratios strings.Builder
	for _, r := range costRatios {
		var values []float64
		for round, v := range rounds[r.of] {
			if o := rounds[r.over][round]; o != nil {
				values = append(values, v.Cost.CPUPerHeartbeatUs/o.Cost.CPUPerHeartbeatUs)
			}
		}
		if len(values) == 0 {
			continue
		}
		sp := spreadOf(values)
		fmt.Fprintf(&ratios, "| %s | %d | %s |\n", r.label, sp.n, sp.text(times, true))
	}
	if ratios.Len() > 0 {
		b.WriteString("\n| CPU per heartbeat, round by round | rounds | ratio |\n|---|---|---|\n")
		b.WriteString(ratios.String())
	}
	return b.String()
}
