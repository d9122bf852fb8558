package history

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap/zaptest"
)

// TestClusterLoad: a host's expiry brake weighs the heartbeats any host of its cluster
// refused, as the hosts report them with their membership rows: each second at the largest
// share a host refused, and the host counts as behind while another one is.
func TestClusterLoad(t *testing.T) {
	t.Parallel()
	// Two hosts on one clock: "owner" serves a worker's shard, "edge" is the host its SDK is
	// connected to, which refuses heartbeats before they reach the owner.
	owner := newAdmissionBundle(t, 4, 100, 1<<20, 0)
	ts := owner.ts
	edge := NewAdmission(owner.a.cfg, ts, tally.NoopScope, zaptest.NewLogger(t))
	ownerLoad := NewClusterLoad(owner.a, ts, zaptest.NewLogger(t))
	edgeLoad := NewClusterLoad(edge, ts, zaptest.NewLogger(t))
	serve := func(a *Admission, n int) {
		for range n {
			release, err := a.Admit(longCtx(t), 0, ClassHeartbeat, 100)
			require.NoError(t, err)
			release()
		}
	}

	ts.Update(ts.Now().Truncate(time.Second).Add(time.Second))
	s1 := ts.Now()
	// Second 1: the owner serves everything it gets; the edge refuses half of what it gets.
	serve(owner.a, 40)
	serve(edge, 10)
	edge.RefusedEarly(10, time.Second)
	// Second 2: the owner refuses a tenth itself (too few refusals to count as behind); the
	// edge serves all.
	ts.Advance(time.Second)
	serve(owner.a, 36)
	owner.a.RefusedEarly(4, time.Second)
	serve(edge, 20)

	share, known := ownerLoad.RefusedShare(s1, s1.Add(time.Second))
	require.True(t, known)
	require.Zero(t, share, "nothing reported yet, and the owner refused nothing in second 1")
	share, _ = ownerLoad.RefusedShare(s1, s1.Add(2*time.Second))
	require.InDelta(t, 0.05, share, 1e-9, "alone, the owner knows only its own tenth in second 2")
	require.Zero(t, ownerLoad.HeartbeatQueueDelay())

	ownerLoad.Received(map[string][]byte{"edge": edgeLoad.Report()})
	share, known = ownerLoad.RefusedShare(s1, s1.Add(time.Second))
	require.True(t, known)
	require.InDelta(t, 0.5, share, 1e-9, "the edge refused half of second 1")
	share, known = ownerLoad.RefusedShare(s1, s1.Add(2*time.Second))
	require.True(t, known)
	require.InDelta(t, (0.5+0.1)/2, share, 1e-9, "each second at the largest share any host refused")
	require.Greater(t, ownerLoad.HeartbeatQueueDelay(), time.Duration(0),
		"the edge refused more than history.expiryBrakeRefusedShare of its recent heartbeats: the cluster is behind")

	// Heartbeats the edge refused that their callers retry may still reach the owner until
	// they can no longer come; the latest of any host counts.
	require.True(t, ownerLoad.RetriesPendingUntil().IsZero())
	edge.RetriedEarly(8 * time.Second)
	owner.a.RetriedEarly(2 * time.Second)
	ownerLoad.Received(map[string][]byte{"edge": edgeLoad.Report()})
	require.Equal(t, ts.Now().Add(8*time.Second).UnixNano(), ownerLoad.RetriesPendingUntil().UnixNano())

	// The edge leaves the cluster: it no longer makes the owner behind, but what it refused
	// still explains the silences of the workers that were connected to it.
	ownerLoad.Received(map[string][]byte{})
	require.Zero(t, ownerLoad.HeartbeatQueueDelay())
	share, _ = ownerLoad.RefusedShare(s1, s1.Add(time.Second))
	require.InDelta(t, 0.5, share, 1e-9)

	// A report that does not decode is left out, and the rest still weigh.
	ownerLoad.Received(map[string][]byte{"edge": edgeLoad.Report(), "garbled": []byte("{")})
	share, _ = ownerLoad.RefusedShare(s1, s1.Add(time.Second))
	require.InDelta(t, 0.5, share, 1e-9)

	// Half an hour on, every record has moved past those seconds, and a host gone that long is
	// forgotten.
	ts.Advance(heartbeatRecord * time.Second)
	ownerLoad.Received(map[string][]byte{})
	_, known = ownerLoad.RefusedShare(s1, s1.Add(2*time.Second))
	require.False(t, known)
	ownerLoad.mu.Lock()
	require.Empty(t, ownerLoad.remote)
	ownerLoad.mu.Unlock()
}
