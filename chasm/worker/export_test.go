package worker

import workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"

// BeginRecountForTest and EndRecountForTest run a recount's two halves around a test's own
// transitions.
func BeginRecountForTest(c *StateCounts) { c.beginRecount() }

func EndRecountForTest(c *StateCounts, counted map[string]StateCount, ok bool) {
	c.endRecount(counted, ok)
}

// KnownWorkers is how many fingerprints of workers seen lately the handler holds, in the
// current generation and in the previous one.
func (h *Handler) KnownWorkers() (cur, prev int) { return h.known.sizes() }

// ShallowCopy is the copy a worker transaction works on.
func ShallowCopy(s *workerpb.WorkerState) *workerpb.WorkerState { return shallowCopy(s) }
