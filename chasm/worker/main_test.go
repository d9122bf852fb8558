package worker_test

import (
	"flag"
	"os"
	"testing"

	"github.com/vigilhq/vigil/chasm"
)

// TestMain has every worker transaction prove that it left the committed state as it was
// (chasm.WithCopyOnWrite), except in benchmarks, which would time the check.
func TestMain(m *testing.M) {
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() == "" {
		chasm.SetCopyOnWriteChecks(true)
	}
	os.Exit(m.Run())
}
