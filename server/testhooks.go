//go:build vigil_testhooks

package server

import (
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
)

// testHooksEnv names the test hooks a process enables, comma-separated. It is read only by a
// binary built with the vigil_testhooks build tag, which the chaos suite sets (tests/chaos);
// the production binary carries no test hook, so no environment can enable one.
//
//   - clock-offset=<duration>: every reading of this host's TimeSource is that far ahead (or
//     behind, negative) of the system clock, as on a host whose clock is off. Durations and
//     timers are unchanged.
const testHooksEnv = "VIGIL_TEST_HOOKS"

// testHookTimeSource returns ts, offset as the clock-offset hook says.
func testHookTimeSource(ts clock.TimeSource, logger *zap.Logger) (clock.TimeSource, error) {
	for _, hook := range strings.Split(os.Getenv(testHooksEnv), ",") {
		v, ok := strings.CutPrefix(strings.TrimSpace(hook), "clock-offset=")
		if !ok {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%s: clock-offset: %w", testHooksEnv, err)
		}
		logger.Warn("test hook enabled: this host's clock is offset", zap.String("env", testHooksEnv), zap.Duration("offset", d))
		return offsetTimeSource{TimeSource: ts, offset: d}, nil
	}
	return ts, nil
}

// offsetTimeSource reads its TimeSource's clock offset by a fixed amount.
type offsetTimeSource struct {
	clock.TimeSource
	offset time.Duration
}

// Now implements clock.TimeSource.
func (o offsetTimeSource) Now() time.Time { return o.TimeSource.Now().Add(o.offset) }

// FromRuntime implements clock.RuntimeFramer: a context's deadline, on the runtime's clock,
// is read on this host's offset clock, as on a host whose one clock is off.
func (o offsetTimeSource) FromRuntime(t time.Time) time.Time { return t.Add(o.offset) }

// NewTimerAt implements clock.TimeSource: deadline is on the offset clock.
func (o offsetTimeSource) NewTimerAt(deadline time.Time) (<-chan time.Time, clock.Timer) {
	return o.TimeSource.NewTimerAt(deadline.Add(-o.offset))
}
