package metrics

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// rawMetric matches a metric created straight on a tally scope, by-passing a definition.
var rawMetric = regexp.MustCompile(`\.(Counter|Gauge|Timer|Histogram)\(`)

// TestEveryMetricIsRecordedThroughADefinition keeps names in one place: a metric created
// straight on a scope elsewhere could reuse a declared name with other labels, and then one of
// the two is never exported (task_errors was, in tasks and in history).
func TestEveryMetricIsRecordedThroughADefinition(t *testing.T) {
	t.Parallel()

	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	self, err := filepath.Abs(".")
	require.NoError(t, err)
	var offenders []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch {
			case path == self, d.Name() == "gen", d.Name() == "tools", strings.HasPrefix(d.Name(), "."):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if rawMetric.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				rel, _ := filepath.Rel(root, path)
				offenders = append(offenders, fmt.Sprintf("%s:%d: %s", rel, i+1, strings.TrimSpace(line)))
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, offenders, "record metrics through a definition in common/metrics (metrics.X.With(scope))")
}
