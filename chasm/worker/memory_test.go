package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/history"
)

// A fleet that registered, expired and was cleaned up leaves nothing in the host's memory:
// no cached execution, no timer task, no singleton timer. While it lives, only a
// few executions per shard are held decoded; the others are held encoded, and nothing a
// worker or an operator sees changes for it.
func TestFleetLeavesNothingInMemory(t *testing.T) {
	t.Parallel()
	const (
		workers      = 200
		cacheDecoded = 8
	)
	b := startHostCached(t, `
matching.InactiveWorkerCleanupDelay:
  - value: 200ms
worker.cleanedUpRetention:
  - value: 200ms
worker.expiryBrakeThreshold:
  - value: 1
`, cacheDecoded)
	key := func(i int) string { return fmt.Sprintf("mem-w%d", i) }
	tokens := make([]int64, workers)
	for i := range workers {
		tokens[i] = b.beat("ns", key(i), withLease(time.Minute)).ConflictToken
	}
	st := b.host.Engine.MemoryStats()
	require.Equal(t, workers, st.CachedExecutions)
	require.LessOrEqual(t, st.DecodedExecutions, cacheDecoded*hostNumShards, "the others are held encoded")

	// Encoded workers come back whole: a heartbeat continues from the stored token, and the
	// record reads as written.
	for i := range workers {
		res := b.beat("ns", key(i), withLease(2*time.Second), withToken(tokens[i]))
		require.Equal(t, tokens[i]+1, res.ConflictToken, "worker %d", i)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, res.Status)
	}
	require.LessOrEqual(t, b.host.Engine.MemoryStats().DecodedExecutions, cacheDecoded*hostNumShards)

	// Leases run out, workers are cleaned up and deleted; then nothing of them stays.
	require.Eventually(t, func() bool {
		return b.host.Engine.MemoryStats() == history.MemoryStats{}
	}, 90*time.Second, 50*time.Millisecond, "memory still holds the fleet: %+v", b.host.Engine.MemoryStats())
	for _, i := range []int{0, workers / 2, workers - 1} {
		ref, err := chasm.NewRef[*worker.Worker](b.host.Engine, chasm.ExecutionKey{NamespaceID: "ns-id", BusinessID: key(i)})
		require.NoError(t, err)
		_, err = chasm.ReadComponent(context.Background(), b.host.Engine, ref, func(chasm.Context, *worker.Worker) (struct{}, error) {
			return struct{}{}, nil
		})
		var notFound *serviceerror.NotFound
		require.ErrorAs(t, err, &notFound, "worker %d was deleted", i)
	}
	require.Zero(t, b.host.Engine.MemoryStats().CachedExecutions, "a lookup of a deleted worker caches nothing")
}

// The fingerprints that rank known workers' heartbeats above registrations outlive a worker's
// silence by one to two rotations, then go, also on a host that sees no more heartbeats at
// all: a fleet that has gone is not remembered for good.
func TestKnownWorkersAreForgottenOnceSilent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rotation = 15 * time.Minute
	generations := func(cur, prev int) func() bool {
		return func() bool {
			c, p := b.handler.KnownWorkers()
			return c == cur && p == prev
		}
	}
	b.mustBeat("w1", withLease(5*time.Minute))
	b.mustBeat("w2", withLease(5*time.Minute))
	require.True(t, generations(2, 0)())

	b.engine.Clock().Advance(rotation) // both in the previous generation now, still known
	require.Eventually(t, generations(0, 2), 10*time.Second, time.Millisecond)
	b.mustBeat("w1", withLease(5*time.Minute))
	require.True(t, generations(1, 2)())

	b.engine.Clock().Advance(rotation) // w2 was silent for a whole generation
	require.Eventually(t, generations(0, 1), 10*time.Second, time.Millisecond)

	b.engine.Clock().Advance(rotation) // and now w1, with no heartbeat coming in at all
	require.Eventually(t, generations(0, 0), 10*time.Second, time.Millisecond)
}
