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

// The summary reads each build's runs by their names and prints medians with their range, and
// b's median over a's.
func TestSummarizesEachBuildsRuns(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, s bench.Summary) {
		data, err := json.Marshal(s)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	alt := func(ratio float64) bench.Summary {
		return bench.Summary{Alternate: &bench.AlternateSummary{HighToBase: ratio}, P99Ms: 100 * ratio}
	}
	write("overload.a.1.json", alt(1.0))
	write("overload.a.2.json", alt(1.2))
	write("overload.a.3.json", alt(1.1))
	write("overload.b.1.json", alt(0.9))
	write("overload.b.2.json", alt(1.0))
	write("overload.b.3.json", alt(1.1))
	write("machine.txt.json", bench.Summary{}) // not a run's name: left out

	r, err := load(dir)
	require.NoError(t, err)
	var out strings.Builder
	summarize(&out, r)
	require.Contains(t, out.String(), "## overload (a: 3 runs, b: 3 runs)")
	require.Contains(t, out.String(), "| 2x/base % | 110 [100–120] | 100 [90–110] | 0.91 |")
}
