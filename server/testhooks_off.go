//go:build !vigil_testhooks

package server

import (
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
)

// testHookTimeSource returns ts: a binary built without the vigil_testhooks tag (every
// production build) has no test hook.
func testHookTimeSource(ts clock.TimeSource, _ *zap.Logger) (clock.TimeSource, error) {
	return ts, nil
}
