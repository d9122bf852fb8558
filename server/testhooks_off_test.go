//go:build !vigil_testhooks

package server

import (
	"testing"

	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
)

// TestNoTestHooksInProductionBuild: a build without the vigil_testhooks tag ignores
// VIGIL_TEST_HOOKS, so no environment can offset a production host's clock.
func TestNoTestHooksInProductionBuild(t *testing.T) {
	t.Setenv("VIGIL_TEST_HOOKS", "clock-offset=2s")
	fake := clock.NewFakeTimeSource()
	ts, err := testHookTimeSource(fake, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if ts != clock.TimeSource(fake) || !ts.Now().Equal(fake.Now()) {
		t.Fatal("the production build offset the clock")
	}
}
