package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/tests/testcluster"
)

// TestBenchOutput: vigil bench prints its summary as a table, or as one JSON object with -o
// json, the same object --json writes to a file.
func TestBenchOutput(t *testing.T) {
	cluster := testcluster.New(t, testcluster.Options{})
	args := []string{"bench", "--address", cluster.Address(), "--workers", "2", "--interval", "100ms", "--duration", "300ms"}

	code, out, stderr := vigilRun(args...)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^api\s+public \(2 workers`, out)

	file := filepath.Join(t.TempDir(), "summary.json")
	code, out, stderr = vigilRun(append(args, "-o", "json", "--json", file)...)
	require.Equal(t, 0, code, stderr)
	var printed, written map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &printed), out)
	require.Equal(t, "public", printed["api"])
	require.EqualValues(t, 2, printed["workers"])
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &written))
	require.Equal(t, written, printed)
}
