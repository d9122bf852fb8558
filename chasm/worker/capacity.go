package worker

import (
	"fmt"
	"sync"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/vigilhq/vigil/common/metrics"
)

// workerCap bounds the worker records of a namespace (worker.maxWorkersPerNamespace): each
// record costs store space and, while its worker is ACTIVE, memory on its host, so a client
// minting a key per heartbeat must not grow them without bound.
//
// The count comes from StateGauges at every report: the store's count, cluster-wide, at the
// last recount, plus the state changes this host committed since (StateCounts); between two
// reports this host adds the workers it admitted itself. Another host's registrations since the
// last recount are not seen, so a cluster may overshoot the cap by what its other hosts register
// in one recount interval (at most worker.registrationRPS each).
type workerCap struct {
	max   func(namespace string) int
	scope tally.Scope

	mu sync.Mutex
	// counted is the namespace's records at the last report, by namespace ID; added, the
	// registrations on this host since.
	counted map[string]int64
	added   map[string]int64
}

func newWorkerCap(max func(namespace string) int, scope tally.Scope) *workerCap {
	return &workerCap{max: max, scope: scope, counted: map[string]int64{}, added: map[string]int64{}}
}

// setCount records a namespace's records as the store counted them.
func (c *workerCap) setCount(namespaceID string, n int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counted[namespaceID] = n
	c.added[namespaceID] = 0
}

// admit counts a new worker of the namespace in, or refuses it with ResourceExhausted.
func (c *workerCap) admit(namespaceID, namespace string) error {
	if c == nil || c.max == nil {
		return nil
	}
	limit := c.max(namespace)
	if limit <= 0 {
		return nil
	}
	c.mu.Lock()
	n := c.counted[namespaceID] + c.added[namespaceID]
	if n < int64(limit) {
		c.added[namespaceID]++
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	metrics.AbuseLimited.With(c.scope, metrics.KindTag("max_workers")).Inc(1)
	return &serviceerror.ResourceExhausted{
		Cause: enumspb.RESOURCE_EXHAUSTED_CAUSE_PERSISTENCE_STORAGE_LIMIT,
		Scope: enumspb.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE,
		Message: fmt.Sprintf("namespace %q holds %d worker records, the limit (worker.maxWorkersPerNamespace is %d): "+
			"reuse worker instance keys across restarts, or wait for inactive workers to be cleaned up", namespace, n, limit),
	}
}
