package worker

import (
	"context"
	"hash/fnv"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/admission"
	"github.com/vigilhq/vigil/common/shard"
)

// Admitter is the admission control in front of the worker's history calls (the host's,
// history.Admission). Admit returns a release to call once the work is done, or the error to
// answer.
type Admitter = admission.Admitter

// HandlerOption configures a Handler.
type HandlerOption func(*Handler)

// WithAdmission puts admission control in front of every call of the handler: heartbeats of
// known workers first, then registrations (paced), then describes and lists.
func WithAdmission(a Admitter) HandlerOption {
	return func(h *Handler) { h.admission = a }
}

// WithBrakeStatus makes DescribeWorker and ListWorkers report the expiry brake.
func WithBrakeStatus(b *Brake) HandlerOption {
	return func(h *Handler) { h.brake = b }
}

// brakeStatus is the brake of a namespace as the liveness view shows it (nil without a brake).
func (h *Handler) brakeStatus(namespaceID string) *workerpb.ExpiryBrakeStatus {
	if h.brake == nil {
		return nil
	}
	st := h.brake.Status(namespaceID)
	out := &workerpb.ExpiryBrakeStatus{Engaged: st.Engaged, Reasons: st.Reasons, HeldExpiries: int64(st.Held)}
	if st.Engaged {
		out.Since = timestamppb.New(st.Since)
	}
	return out
}

// knownWorkersRotation is how long a worker stays known without a heartbeat: longer than any
// lease (worker.maxLeaseDuration, 10m by default) so that every live worker stays known.
const knownWorkersRotation = 15 * time.Minute

// knownWorkers remembers which workers heartbeated lately, as 64-bit fingerprints in two
// generations (about 16 bytes each, so 100,000 workers cost under 4 MB). It only decides
// priority: a forgotten worker (after a restart, or silent longer than the rotation) is served
// as a registration, and a fingerprint collision only raises one call's priority.
type knownWorkers struct {
	mu        sync.Mutex
	cur, prev map[uint64]struct{}
	rotatedAt time.Time
}

func newKnownWorkers() *knownWorkers {
	return &knownWorkers{cur: make(map[uint64]struct{}), prev: make(map[uint64]struct{})}
}

func fingerprint(namespaceID, instanceKey string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(namespaceID))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(instanceKey))
	return h.Sum64()
}

func (k *knownWorkers) contains(fp uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.cur[fp]; ok {
		return true
	}
	_, ok := k.prev[fp]
	return ok
}

func (k *knownWorkers) add(fp uint64, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.rotatedAt.IsZero() {
		k.rotatedAt = now
	}
	if now.Sub(k.rotatedAt) > knownWorkersRotation {
		k.prev, k.cur, k.rotatedAt = k.cur, make(map[uint64]struct{}, len(k.cur)), now
	}
	k.cur[fp] = struct{}{}
}

// heartbeatClass is a heartbeat's admission class: a worker this host saw heartbeat, or one
// that says it heartbeated before (the SDK reports the interval since its last beat; the
// extended API sends its conflict token), is a known worker; anything else registers.
//
// Except a worker whose registration this host turned away: the SDK reports the interval
// since its refused first beat too, and a refused burst coming back as "known" heartbeats
// would take the slots and the commit lane kept for live workers.
func (h *Handler) heartbeatClass(namespaceID string, entry *workerpb.HeartbeatEntry) admission.Class {
	hb := entry.GetHeartbeat()
	fp := fingerprint(namespaceID, hb.GetWorkerInstanceKey())
	switch {
	case entry.ConflictToken != nil || h.known.contains(fp):
		return admission.ClassHeartbeat
	case hb.GetElapsedSinceLastHeartbeat().AsDuration() > 0 && !h.turnedAway.contains(fp):
		return admission.ClassHeartbeat
	}
	return admission.ClassRegistration
}

// admit takes a slot for a call on the worker's shard; without admission control it is free.
func (h *Handler) admit(ctx context.Context, namespaceID, instanceKey string, class admission.Class, bytes int) (func(), error) {
	if h.admission == nil {
		return func() {}, nil
	}
	gate := admission.ListGate
	if instanceKey != "" {
		gate = shard.ForKey(namespaceID, instanceKey, h.config.NumShards)
	}
	return h.admission.Admit(ctx, gate, class, bytes)
}
