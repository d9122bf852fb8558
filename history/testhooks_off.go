//go:build !vigil_testhooks || !unix

package history

import "go.uber.org/zap"

// installTestHooks enables nothing: a binary built without the vigil_testhooks tag (every
// production build) has no test hook, nor has one where there are no user signals.
func installTestHooks(*StoreMonitor, *zap.Logger) func() { return func() {} }
