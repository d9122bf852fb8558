// Command pairs summarizes the runs of bench/pairs.sh: for each scenario and each of the two
// builds (a, b), the median of every figure over its runs and their range, and b's median as a
// share of a's. Runs are named SCENARIO.BUILD.PAIR.json.
//
//	go run ./bench/pairs -results bench-results/pairs-20261201T120000Z
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vigilhq/vigil/bench"
)

func main() {
	results := flag.String("results", "", "folder written by bench/pairs.sh")
	flag.Parse()
	if *results == "" {
		fmt.Fprintln(os.Stderr, "pairs: -results is required")
		os.Exit(2)
	}
	runs, err := load(*results)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pairs:", err)
		os.Exit(1)
	}
	summarize(os.Stdout, runs)
}

// runs holds the summaries by scenario, then build.
type runs map[string]map[string][]*bench.Summary

func load(dir string) (runs, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	out := runs{}
	for _, p := range paths {
		parts := strings.Split(strings.TrimSuffix(filepath.Base(p), ".json"), ".")
		if len(parts) != 3 {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var s bench.Summary
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if out[parts[0]] == nil {
			out[parts[0]] = map[string][]*bench.Summary{}
		}
		out[parts[0]][parts[1]] = append(out[parts[0]][parts[1]], &s)
	}
	return out, nil
}

// figure is one number of a run, and whether the run has it.
type figure struct {
	name string
	of   func(*bench.Summary) (float64, bool)
}

var figures = []figure{
	{"2x/base %", func(s *bench.Summary) (float64, bool) {
		if s.Alternate == nil {
			return 0, false
		}
		return 100 * s.Alternate.HighToBase, true
	}},
	{"base ok/s", func(s *bench.Summary) (float64, bool) {
		if s.Alternate == nil {
			return 0, false
		}
		return s.Alternate.BaseRate.ThroughputPerS, true
	}},
	{"2x ok/s", func(s *bench.Summary) (float64, bool) {
		if s.Alternate == nil {
			return 0, false
		}
		return s.Alternate.HighRate.ThroughputPerS, true
	}},
	{"offered/s", func(s *bench.Summary) (float64, bool) { return s.OfferedPerS, s.Alternate == nil }},
	{"ok/s", func(s *bench.Summary) (float64, bool) { return s.ThroughputPerS, s.Alternate == nil }},
	{"errors", func(s *bench.Summary) (float64, bool) { return float64(s.Errors), true }},
	{"p99 ms", func(s *bench.Summary) (float64, bool) { return s.P99Ms, true }},
	{"killed undetected", func(s *bench.Summary) (float64, bool) {
		if s.Kill == nil {
			return 0, false
		}
		return float64(s.Kill.Killed - s.Kill.Detected), true
	}},
	{"detection max ms", func(s *bench.Summary) (float64, bool) {
		if s.Kill == nil {
			return 0, false
		}
		return s.Kill.DetectionServerMaxMs, true
	}},
	{"false INACTIVE", func(s *bench.Summary) (float64, bool) {
		if s.ServerAtLoadEnd == nil {
			return 0, false
		}
		killed := 0
		if s.Kill != nil {
			killed = s.Kill.Killed
		}
		return s.ServerAtLoadEnd["worker_resurrections"] + math.Max(0, s.ServerAtLoadEnd["worker_lease_expiries"]-float64(killed)), true
	}},
	{"burst all registered s", func(s *bench.Summary) (float64, bool) {
		if s.Burst == nil || s.Burst.AllRegisteredMs == nil {
			return 0, false
		}
		return *s.Burst.AllRegisteredMs / 1000, true
	}},
	{"burst refused", func(s *bench.Summary) (float64, bool) {
		if s.Burst == nil {
			return 0, false
		}
		return float64(s.Burst.Refused), true
	}},
	{"fleet p99 in burst ms", func(s *bench.Summary) (float64, bool) {
		if s.Burst == nil {
			return 0, false
		}
		return s.Burst.During.P99Ms, true
	}},
	{"CPU µs/heartbeat", func(s *bench.Summary) (float64, bool) {
		if s.Cost == nil || s.Cost.CPUPerHeartbeatUs == 0 {
			return 0, false
		}
		return s.Cost.CPUPerHeartbeatUs, true
	}},
	{"server RSS MiB", func(s *bench.Summary) (float64, bool) {
		if s.Server == nil || s.Server.Samples == 0 {
			return 0, false
		}
		return s.Server.MaxRSSMiB, true
	}},
	{"server CPU %", func(s *bench.Summary) (float64, bool) {
		if s.Server == nil || s.Server.Samples == 0 {
			return 0, false
		}
		return s.Server.MeanCPUPct, true
	}},
}

func summarize(w io.Writer, r runs) {
	scenarios := make([]string, 0, len(r))
	for s := range r {
		scenarios = append(scenarios, s)
	}
	sort.Strings(scenarios)
	for _, sc := range scenarios {
		fmt.Fprintf(w, "## %s (a: %d runs, b: %d runs)\n\n| figure | a: median [min–max] | b: median [min–max] | b ÷ a |\n|---|---|---|---|\n",
			sc, len(r[sc]["a"]), len(r[sc]["b"]))
		for _, f := range figures {
			a, okA := values(r[sc]["a"], f)
			b, okB := values(r[sc]["b"], f)
			if !okA && !okB {
				continue
			}
			ratio := "–"
			if ma, mb := median(a), median(b); okA && okB && ma != 0 {
				ratio = fmt.Sprintf("%.2f", mb/ma)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", f.name, spread(a), spread(b), ratio)
		}
		fmt.Fprintln(w)
	}
}

func values(ss []*bench.Summary, f figure) ([]float64, bool) {
	var out []float64
	for _, s := range ss {
		if v, ok := f.of(s); ok {
			out = append(out, v)
		}
	}
	return out, len(out) > 0
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func spread(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return fmt.Sprintf("%s [%s–%s]", short(median(v)), short(lo), short(hi))
}

func short(x float64) string {
	if math.Abs(x) >= 100 || x == math.Trunc(x) {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.1f", x)
}
