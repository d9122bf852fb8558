package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/bench"
)

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

func page(names ...string) string {
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	for _, n := range names {
		b.WriteString("## " + n + "\n\n" + Marker(n, true) + "\nold " + n + " table\n" + Marker(n, false) + "\n\n")
	}
	return b.String()
}

// A run of some scenarios rewrites their tables and the machine, and leaves the others alone.
func TestRegeneratesOnlyTheScenariosRun(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "machine.txt"), []byte(
		"commit: abc1234\ndate: 2026-12-01\ncpu: 2 x Test CPU\nmemory: 24 GiB\nkernel: Linux 6.18\ndisk: ext4\ngo: go1.26\nload before: 0.50 0.40 0.30\nmode: full\nload after: 1.00 0.80 0.60\n"), 0o644))
	writeJSON(t, filepath.Join(dir, "recovery.json"), bench.Summary{
		P50Ms: 1.5, P99Ms: 7,
		Kill: &bench.KillSummary{Killed: 100, Detected: 100, HandedBack: 100, ActivitiesAtKill: 10000,
			DetectionServerP50Ms: 1, DetectionServerMaxMs: 2, PollIntervalMs: 100, DetectionP50Ms: 52, DetectionP99Ms: 98, RedispatchAllMs: 104},
	})
	writeJSON(t, filepath.Join(dir, "churn-50.json"), bench.Summary{OfferedPerS: 68, ThroughputPerS: 68, P50Ms: 206, P99Ms: 477, MaxMs: 600})
	writeJSON(t, filepath.Join(dir, "churn-0.json"), bench.Summary{OfferedPerS: 50, ThroughputPerS: 50, P50Ms: 1.8, P99Ms: 6.9, MaxMs: 20})

	blocks, err := render(dir)
	require.NoError(t, err)
	got, replaced, err := replaceBlocks(page("machine", "churn", "recovery", "fleet"), blocks)
	require.NoError(t, err)
	require.Equal(t, []string{"churn", "machine", "recovery"}, replaced)

	require.Contains(t, got, "old fleet table", "a scenario that was not run keeps its table")
	require.NotContains(t, got, "old churn table")
	require.Contains(t, got, "Measured 2026-12-01 on `abc1234`: 2 x Test CPU, 24 GiB, load average 0.50 before.")
	require.Contains(t, got, "| detection after the lease deadline, server's own (p50, max) | **1.00 ms**, **2.00 ms** |")
	require.Contains(t, got, "| every killed worker's activities handed back, after the lease deadline | **104 ms** |")
	// Churn rows in order of the percentage, not of the file names.
	require.Less(t, strings.Index(got, "| 0 % |"), strings.Index(got, "| 50 % |"))
	require.Contains(t, got, "| 50 % | 68 | 68 | 206 ms | **477 ms** |")
}

func TestMissingMarkersAreAnError(t *testing.T) {
	_, _, err := replaceBlocks(page("machine"), map[string]string{"fleet": "x\n"})
	require.ErrorContains(t, err, "bench:fleet begin")
}

func TestFormatting(t *testing.T) {
	require.Equal(t, "100,000", num(100000))
	require.Equal(t, "3,319", num(3318.6))
	require.Equal(t, "999", num(999))
	require.Equal(t, "2.31 s", ms(2310))
	require.Equal(t, "32.0 ms", ms(32))
	require.Equal(t, "0.50 ms", ms(0.5))
}

// Killed workers that never had a heartbeat accepted have no deadline to time detection from:
// the table says so instead of showing zeros.
func TestUntimedDetectionIsNotShownAsZero(t *testing.T) {
	got := renderFleet(map[string]*bench.Summary{"fleet": {Workers: 2000, P99Ms: 32, Kill: &bench.KillSummary{
		Killed: 10, Detected: 10, Notes: []string{"10 killed workers never had a heartbeat accepted (no lease): left out of the detection times"},
	}}})
	require.Contains(t, got, "| 10, 10 | **not timed (see the note)** |")
	require.Contains(t, got, "Note: 10 killed workers never had a heartbeat accepted")
	require.NotContains(t, got, "0.00 ms, 0.00 ms")
}

// costRuns is a results folder's runs of the cost scenario, by run name.
func costRuns(named map[string]bench.Summary) map[string]*bench.Summary {
	runs := make(map[string]*bench.Summary, len(named))
	for name, s := range named {
		runs[name] = &s
	}
	return runs
}

func costRunSummary(cpuUs, regUs, p50, p99 float64) bench.Summary {
	return bench.Summary{P50Ms: p50, P99Ms: p99, ThroughputPerS: 2000, Cost: &bench.CostSummary{
		CPUPerHeartbeatUs: cpuUs, CPUPerRegistrationUs: &regUs, Steady: bench.CostWindow{ServerCPUPct: cpuUs / 5},
	}}
}

// The cost table gives each server's median and range over its runs, and vigil's ratio over
// each other server round by round: a round's runs share the same minutes of the box.
func TestCostTableTakesRatiosRoundByRound(t *testing.T) {
	// Round 2 ran on a box twice as slow: every server's cost doubled, the ratios did not.
	got := renderCost(costRuns(map[string]bench.Summary{
		"cost-vigil-1": costRunSummary(200, 600, 1.2, 5),
		"cost-vigil-2": costRunSummary(400, 700, 1.4, 9),
		"cost-vigil-3": costRunSummary(220, 650, 1.3, 6),
		"cost-floor-1": costRunSummary(100, 120, 0.5, 2),
		"cost-floor-2": costRunSummary(200, 130, 0.6, 3),
		"cost-floor-3": costRunSummary(100, 125, 0.55, 2.5),
		"cost-peer-1":  costRunSummary(350, 400, 1, 8),
	}))

	require.Contains(t, got, "| vigil (SQLite) | 3 | **220 µs** (200 µs–400 µs) | 650 µs (600 µs–700 µs) | 1.30 ms (1.20 ms–1.40 ms) | 6.00 ms (5.00 ms–9.00 ms) | 2,000 | 0 | 44 % (40 %–80 %) |")
	require.Contains(t, got, "| floor: gRPC only | 3 | **100 µs** (100 µs–200 µs) |")
	require.Contains(t, got, "| stock Temporal | 1 | **350 µs** |")
	require.NotContains(t, got, "SQLite group commit", "a server without runs has no row")
	require.Contains(t, got, "| vigil ÷ gRPC floor | 3 | **2.00×** (2.00×–2.20×) |")
	require.Contains(t, got, "| vigil ÷ stock Temporal | 1 | **0.57×** |", "only the rounds both ran")
	require.NotContains(t, got, "vigil ÷ gRPC + SQLite floor")
	require.Less(t, strings.Index(got, "vigil (SQLite)"), strings.Index(got, "floor: gRPC only"))
}

// The fleet whose every heartbeat is written has rows of its own, both storing floors among
// them, and its ratio is taken over the upsert floor on the same fleet, not over the floor of
// the 1 s fleet.
func TestCostTableComparesTheWrittenFleetWithItsOwnFloor(t *testing.T) {
	got := renderCost(costRuns(map[string]bench.Summary{
		"cost-vigil-1":                    costRunSummary(140, 340, 0.4, 13),
		"cost-floor-sqlite-1":             costRunSummary(140, 140, 5, 11),
		"cost-vigil-written-1":            costRunSummary(220, 340, 7, 20),
		"cost-floor-sqlite-written-1":     costRunSummary(176, 140, 5, 11),
		"cost-floor-sqlite-log-written-1": costRunSummary(170, 140, 5, 11),
	}))

	require.Contains(t, got, "| vigil (SQLite), every heartbeat written | 1 | **220 µs** |")
	require.Contains(t, got, "| floor: gRPC + SQLite group commit, on the same fleet | 1 | **176 µs** |")
	require.Contains(t, got, "| vigil ÷ gRPC + SQLite floor | 1 | **1.00×** |")
	require.Contains(t, got, "| floor: gRPC + SQLite group commit, append-only log, on the same fleet | 1 | **170 µs** |")
	require.Contains(t, got, "| every heartbeat written: vigil ÷ gRPC + SQLite floor | 1 | **1.25×** |")
	require.Contains(t, got, "| every heartbeat written: append-only log floor ÷ upsert floor | 1 | **0.97×** |")
	require.Less(t, strings.Index(got, "| vigil (SQLite) |"), strings.Index(got, "every heartbeat written |"))
	require.Less(t, strings.Index(got, "group commit, on the same fleet |"), strings.Index(got, "append-only log, on the same fleet |"))
}

// vigil on PostgreSQL costs what vigil and PostgreSQL's processes spent together: a
// PostgreSQL row without PostgreSQL's CPU would hide most of the write's cost.
func TestCostTableCountsPostgreSQLsCPU(t *testing.T) {
	vigil, pg := costRunSummary(200, 600, 1.2, 5), costRunSummary(150, 500, 3, 9)
	pg.Cost.StorePID, pg.Cost.StoreCPUPerHeartbeatUs = 42, 120
	got := renderCost(map[string]*bench.Summary{"cost-vigil-1": &vigil, "cost-vigil-pg-1": &pg})
	require.Contains(t, got, "| vigil (PostgreSQL), with PostgreSQL's own CPU | 1 | **270 µs** |")
	require.Contains(t, got, "On PostgreSQL, the CPU per heartbeat is vigil's and PostgreSQL's")
	require.Contains(t, renderCost(map[string]*bench.Summary{"cost-vigil-1": &vigil}), "| vigil (SQLite) | 1 | **200 µs** |")
	require.NotContains(t, renderCost(map[string]*bench.Summary{"cost-vigil-1": &vigil}), "On PostgreSQL")
}

// A run of some scenarios leaves the machine block, which speaks for the whole page.
func TestASubsetLeavesTheMachineBlock(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "machine.txt"), []byte(
		"commit: abc1234\ndate: 2026-12-01\ncpu: 2 x Test CPU\nmemory: 24 GiB\nload before: 0.50 0.40 0.30\nmode: full\nscenarios: cost\nall scenarios: no\n"), 0o644))
	s := costRunSummary(200, 600, 1.2, 5)
	writeJSON(t, filepath.Join(dir, "cost-vigil-1.json"), s)
	blocks, err := render(dir)
	require.NoError(t, err)
	require.NotContains(t, blocks, "machine")
	require.Contains(t, blocks["cost"], "Measured 2026-12-01 on `abc1234`")
}

// A server that did not carry the offered rate is said to have been at its limit: its CPU per
// heartbeat is not one of a server below capacity.
func TestCostTableSaysWhoDidNotCarryTheLoad(t *testing.T) {
	vigil, peer := costRunSummary(200, 600, 1.2, 5), costRunSummary(330, 650, 1000, 3000)
	vigil.OfferedPerS, peer.OfferedPerS, peer.ThroughputPerS = 2000, 2000, 1300
	got := renderCost(map[string]*bench.Summary{"cost-vigil-1": &vigil, "cost-peer-1": &peer})
	require.Contains(t, got, "**Not below capacity**: stock Temporal carried 1,300 of the 2,000 heartbeats/s offered")
	require.NotContains(t, got, "vigil (SQLite) carried")
}

// The memory table shows the fleet on the liveness API and, where it was measured, the fleet of
// SDK workers, each on a row of its own.
func TestMemoryTableShowsBothFleets(t *testing.T) {
	dir := t.TempDir()
	header := "workers   idle_MiB  registered_MiB  KiB/worker   live_KiB/worker  after_MiB  after_live_MiB  after/idle  heap_MiB  rt_MiB  other_MiB\n"
	write := func(sub, row string) string {
		path := filepath.Join(dir, sub, "summary.txt")
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(header+row), 0o644))
		return path
	}
	liveness := write("memory", "100000        48.1           268.7        2.26              1.01       83.8            18.0        1.74      27.9    17.7       38.2\n")
	sdk := write("memory-sdk", "100000        49.0           301.2        2.59              1.30       85.0            18.0        1.73      27.9    17.7       38.2\n")

	table, err := renderMemory(liveness, sdk)
	require.NoError(t, err)
	require.Contains(t, table, "| liveness API | 100,000 | 48.1 MiB | 268.7 MiB | **2.26 KiB** | 1.01 KiB | 83.8 MiB | 1.74 |")
	require.Contains(t, table, "| SDK workers | 100,000 | 49.0 MiB | 301.2 MiB | **2.59 KiB** | 1.30 KiB | 85.0 MiB | 1.73 |")

	alone, err := renderMemory(liveness, filepath.Join(dir, "none", "summary.txt"))
	require.NoError(t, err)
	require.NotContains(t, alone, "SDK workers", "a fleet not measured has no row")
	require.Contains(t, alone, "liveness API")
}
