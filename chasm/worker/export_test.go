package worker

// KnownWorkers is how many fingerprints of workers seen lately the handler holds, in the
// current generation and in the previous one.
func (h *Handler) KnownWorkers() (cur, prev int) { return h.known.sizes() }
