package server

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm/worker/watch"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/membership"
)

// A server of one host serves its history hub's log to its watchers as is; a host of a larger
// cluster relays every member's log into a hub of its own.
func TestLiveLogOfOneHostIsItsOwnHub(t *testing.T) {
	t.Parallel()
	ts := clock.NewRealTimeSource()
	local := watch.NewHub(watch.Options{TimeSource: ts})
	lc := fxtest.NewLifecycle(t) // never started: the fan-in would dial the other member

	alone := newLiveLog(lc, local, membership.NewStatic(membership.Host{ID: "a"}), nil, ts, zap.NewNop())
	require.Same(t, local, alone.hub)

	two := membership.NewStatic(membership.Host{ID: "a"}, membership.Host{ID: "b", HistoryAddress: "127.0.0.1:1"})
	require.NotSame(t, local, newLiveLog(lc, local, two, nil, ts, zap.NewNop()).hub)
}
