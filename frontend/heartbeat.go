package frontend

import (
	"context"
	"sync"

	"go.temporal.io/api/serviceerror"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/frontend/namespace"
)

// heartbeatOutcome is what became of one heartbeat of a request.
type heartbeatOutcome struct {
	result *workerpb.HeartbeatResult
	// err is set when the heartbeat failed: its own EntryError, or its shard's call failing.
	err error
	// entryErr is history's per-heartbeat error, when that is why it failed.
	entryErr *workerpb.EntryError
}

// recordHeartbeats sends entries to history, one call per shard, all shards in parallel, and
// returns one outcome per entry, in the order of entries. A failed shard fails only its own
// entries; every shard is called even when another one fails, so that as many leases as
// possible are renewed.
func recordHeartbeats(ctx context.Context, history HistoryClient, ns *namespace.Namespace, entries []*workerpb.HeartbeatEntry) []heartbeatOutcome {
	outcomes := make([]heartbeatOutcome, len(entries))
	shardOf := make([]int32, len(entries))
	oneShard := true
	for i, e := range entries {
		shardOf[i] = history.ShardFor(ns.ID, e.GetHeartbeat().GetWorkerInstanceKey())
		oneShard = oneShard && shardOf[i] == shardOf[0]
	}

	// callShard sends the entries at indexes (all of them, in order, when nil) to shard.
	callShard := func(shard int32, indexes []int) {
		principal, admin := principalOf(ctx, ns)
		req := &workerpb.RecordHeartbeatsRequest{
			NamespaceId:      ns.ID,
			Namespace:        ns.Name,
			ShardId:          shard,
			Heartbeats:       entries,
			Principal:        principal,
			PrincipalIsAdmin: admin,
		}
		if indexes != nil {
			req.Heartbeats = make([]*workerpb.HeartbeatEntry, len(indexes))
			for j, i := range indexes {
				req.Heartbeats[j] = entries[i]
			}
		}
		resp, err := history.RecordHeartbeats(ctx, req)
		if err == nil && len(resp.GetResults()) != len(req.Heartbeats) {
			err = serviceerror.NewInternalf("history shard %d returned %d results for %d heartbeats", shard, len(resp.GetResults()), len(req.Heartbeats))
		}
		for j := range req.Heartbeats {
			i := j
			if indexes != nil {
				i = indexes[j]
			}
			switch {
			case err != nil:
				outcomes[i].err = err
			case resp.Results[j].GetError() != nil:
				outcomes[i].entryErr = resp.Results[j].GetError()
				outcomes[i].err = entryError(outcomes[i].entryErr)
			default:
				outcomes[i].result = resp.Results[j]
			}
		}
	}

	// One shard, as for every heartbeat of a worker that reports alone: no grouping.
	if oneShard {
		if len(entries) > 0 {
			callShard(shardOf[0], nil)
		}
		return outcomes
	}
	byShard := make(map[int32][]int)
	var shards []int32
	for i, shard := range shardOf {
		if _, seen := byShard[shard]; !seen {
			shards = append(shards, shard)
		}
		byShard[shard] = append(byShard[shard], i)
	}
	// Each goroutine writes only the outcomes of its own shard's entries.
	var wg sync.WaitGroup
	for _, shard := range shards {
		wg.Go(func() { callShard(shard, byShard[shard]) })
	}
	wg.Wait()
	return outcomes
}

// heartbeatsError is the error of a multi-heartbeat request: nil when every heartbeat was
// recorded, otherwise the most actionable failure (see codeRank).
func heartbeatsError(entries []*workerpb.HeartbeatEntry, outcomes []heartbeatOutcome) error {
	var failures []heartbeatFailure
	for i, o := range outcomes {
		if o.err != nil {
			failures = append(failures, heartbeatFailure{
				workerInstanceKey: entries[i].GetHeartbeat().GetWorkerInstanceKey(),
				err:               o.err,
			})
		}
	}
	return mostActionable(failures, len(entries))
}

// principalOf returns the caller's principal and whether it is an admin of ns, for worker
// ownership; "" when auth is off.
func principalOf(ctx context.Context, ns *namespace.Namespace) (string, bool) {
	claims := auth.ClaimsFromContext(ctx)
	if claims == nil {
		return "", false
	}
	return claims.Subject, claims.RoleIn(ns.Name)&auth.RoleAdmin != 0
}
