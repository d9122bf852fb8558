package worker

import (
	"context"
	"hash/fnv"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/overload"
	"github.com/vigilhq/vigil/common/shard"
)

// Admitter is the admission control in front of the worker's history calls (the host's,
// history.Admission). Admit returns a release to call once the work is done, or the error to
// answer.
type Admitter = overload.Admitter

// HandlerOption configures a Handler.
type HandlerOption func(*Handler)

// WithAdmission puts admission control in front of every call of the handler: heartbeats of
// known workers first, then registrations, then describes and lists.
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
//
// The generations rotate on a timer, every knownWorkersRotation while either holds a
// fingerprint, not on the next heartbeat: once a fleet has gone, a host that sees no more
// heartbeats forgets it within two rotations instead of keeping it for good. A new generation
// starts small rather than sized for the last one, which may have held a fleet since gone.
type knownWorkers struct {
	timeSource clock.TimeSource
	mu         sync.Mutex
	cur, prev  map[uint64]struct{}
	// rotating is the next rotation, armed while either generation holds a fingerprint.
	rotating clock.Timer
}

func newKnownWorkers(timeSource clock.TimeSource) *knownWorkers {
	return &knownWorkers{timeSource: timeSource, cur: make(map[uint64]struct{}), prev: make(map[uint64]struct{})}
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

func (k *knownWorkers) add(fp uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cur[fp] = struct{}{}
	if k.rotating == nil {
		k.rotating = k.timeSource.AfterFunc(knownWorkersRotation, k.rotate)
	}
}

// rotate makes the current generation the previous one, forgetting the workers that did not
// heartbeat for a whole generation.
func (k *knownWorkers) rotate() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.prev, k.cur = k.cur, make(map[uint64]struct{})
	k.rotating = nil
	if len(k.prev) > 0 {
		k.rotating = k.timeSource.AfterFunc(knownWorkersRotation, k.rotate)
	}
}

// sizes is how many fingerprints each generation holds, for tests.
func (k *knownWorkers) sizes() (cur, prev int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.cur), len(k.prev)
}

// heartbeatClass is a heartbeat's admission class: a worker this host saw heartbeat, or one
// that says it heartbeated before (the SDK reports the interval since its last beat; the
// extended API sends its conflict token), is a known worker; anything else registers.
//
// Except a worker whose registration this host turned away: the SDK reports the interval
// since its refused first beat too, and a refused burst coming back as "known" heartbeats
// would take the slots and the commit lane kept for live workers.
func (h *Handler) heartbeatClass(namespaceID string, entry *workerpb.HeartbeatEntry) overload.Class {
	hb := entry.GetHeartbeat()
	fp := fingerprint(namespaceID, hb.GetWorkerInstanceKey())
	switch {
	case entry.ConflictToken != nil || h.known.contains(fp):
		return overload.ClassHeartbeat
	case hb.GetElapsedSinceLastHeartbeat().AsDuration() > 0 && !h.turnedAway.contains(fp):
		return overload.ClassHeartbeat
	}
	return overload.ClassRegistration
}

// admit takes a slot for a call on the worker's shard; without admission control it is free.
func (h *Handler) admit(ctx context.Context, namespaceID, instanceKey string, class overload.Class, bytes int) (func(), error) {
	if h.admission == nil {
		return func() {}, nil
	}
	gate := overload.ListGate
	if instanceKey != "" {
		gate = shard.ForKey(namespaceID, instanceKey, h.config.NumShards)
	}
	return h.admission.Admit(ctx, gate, class, bytes)
}
