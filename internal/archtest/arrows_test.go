// Package archtest checks the house's arrows (docs/architecture.md, "Packages"): no package
// imports a package above it.
package archtest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/vigilhq/vigil/"

// forbidden maps a package pattern to the packages nothing it depends on (tests aside) may be.
var forbidden = map[string][]string{
	"chasm/...":         {"history", "frontend", "matching", "server", "persistence", "tasks"},
	"history/...":       {"frontend", "matching", "server", "chasm/worker", "chasm/activity"},
	"tasks/...":         {"history", "chasm", "frontend", "matching", "server"},
	"persistence/...":   {"history", "tasks", "chasm", "frontend", "matching", "server"},
	"matching/...":      {"history", "chasm", "frontend", "persistence", "server"},
	"frontend/...":      {"history", "persistence", "server", "tasks"},
	"dynamicconfig/...": {"history", "chasm", "frontend", "matching", "persistence", "server", "tasks"},
	"common/...":        {"history", "chasm", "frontend", "matching", "persistence", "server", "tasks", "dynamicconfig"},
}

func TestArrowsPointDown(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	for pattern, banned := range forbidden {
		t.Run(pattern, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+pattern).CombinedOutput()
			require.NoError(t, err, string(out))
			for _, dep := range strings.Fields(string(out)) {
				rel, ok := strings.CutPrefix(dep, module)
				if !ok {
					continue
				}
				for _, b := range banned {
					if rel == b || strings.HasPrefix(rel, b+"/") {
						t.Errorf("%s depends on %s, which is above it", pattern, rel)
					}
				}
			}
		})
	}
}
