//go:build vigil_testhooks && unix

package history

import (
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.uber.org/zap"
)

// testHooksEnv names the test hooks a process enables, comma-separated. It is read only by a
// binary built with the vigil_testhooks build tag, which the chaos suite sets (tests/chaos);
// the production binary carries no test hook, so no environment can enable one.
//
//   - renewal-signals: SIGUSR1 pauses this host's membership loop (StoreMonitor.PauseRenewals)
//     and SIGUSR2 resumes it, the rest of the host serving on.
//   - history-via=<address>><through>: this host dials the history host at address through
//     the address through (testhooks_dial.go).
const testHooksEnv = "VIGIL_TEST_HOOKS"

// installTestHooks enables the hooks testHooksEnv names for m; the returned function removes
// them.
func installTestHooks(m *StoreMonitor, logger *zap.Logger) func() {
	if !strings.Contains(os.Getenv(testHooksEnv), "renewal-signals") {
		return func() {}
	}
	logger.Warn("test hook enabled: SIGUSR1 pauses and SIGUSR2 resumes membership renewals", zap.String("env", testHooksEnv))
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGUSR2)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case sig := <-signals:
				m.PauseRenewals(sig == syscall.SIGUSR1)
			}
		}
	}()
	return func() {
		signal.Stop(signals)
		close(done)
	}
}
