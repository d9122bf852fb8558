// Package watch is the live view's event hub: it turns the committed worker changes of this
// history host into a numbered event log (a bounded ring), tracks which hosts (machines) are
// online, and feeds any number of watchers, each through a bounded buffer of its own.
//
// A history host's hub is fed by its own shards (Publish) and served to the cluster's
// frontends (Server, WorkerWatchService). In a cluster of several hosts a frontend's hub is
// fed by every host's (Relay, Gap): it is the cluster's log as that frontend saw it, and its
// watchers subscribe to it. A server of one host has no such hub: its watchers subscribe to
// the history host's, which is the whole cluster's log.
package watch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/memrelease"
)

// Kind is what an event reports: a worker change (worker.ChangeKind values) or a host one.
type Kind uint8

// Event kinds. The worker ones equal worker.ChangeKind.
const (
	KindRegistered                 = Kind(worker.ChangeRegistered)
	KindHeartbeat                  = Kind(worker.ChangeHeartbeat)
	KindInactive                   = Kind(worker.ChangeInactive)
	KindResurrected                = Kind(worker.ChangeResurrected)
	KindCleanedUp                  = Kind(worker.ChangeCleanedUp)
	KindDeleted                    = Kind(worker.ChangeDeleted)
	KindDrainRequested             = Kind(worker.ChangeDrainRequested)
	KindActivitiesRescheduled      = Kind(worker.ChangeActivitiesRescheduled)
	KindHostOnline            Kind = 100
	KindHostOffline           Kind = 101
	// KindGap marks where a relaying hub lost events (Gap); it is never delivered.
	KindGap Kind = 102
)

// Event is one entry of the hub's log.
type Event struct {
	// Seq numbers the hub's events from 1, without gaps.
	Seq               uint64
	Time              time.Time
	Kind              Kind
	NamespaceID       string
	WorkerInstanceKey string // empty for host events
	HostName          string
	// State is the worker's state after the change (nil for host events); read-only.
	State *workerpb.WorkerState
	Count int64

	// encoded is State as the ring keeps it, with State nil: about 280 bytes for an SDK
	// worker's state instead of about 1.8 KB of decoded messages. Watchers that are connected
	// get the decoded state as it is published; a resuming watcher's reader decodes what it
	// replays (Subscription.Next), outside the hub's lock. A full ring of 8,192 decoded
	// states held 14 MB, as much as the cached state of 50,000 idle workers, and all of it
	// pointers for the collector to mark.
	encoded []byte
}

// Options size a hub. Zero values take the defaults.
type Options struct {
	// RingSize is how many events the hub keeps for resuming watchers (default 8,192; each holds
	// the worker's state encoded, a few hundred bytes).
	RingSize int
	// BufferSize is how many undelivered events a watcher may have before it must resync
	// (default 16,384). A worker's heartbeats take one place (the latest replaces the one
	// before while nothing else of that worker follows it).
	BufferSize int
	// RingRetention is how long an event stays in the ring (default 1 minute). Events hold the
	// worker's state, so a ring full after a burst would otherwise keep tens of megabytes for
	// as long as the host is quiet; a watcher away for longer resyncs, as it does after an
	// overflow. It is also how long the ring goes on after the last watcher left: once nobody
	// has watched for that long, no cursor can resume, and the hub keeps nothing (idle).
	RingRetention time.Duration
	TimeSource    clock.TimeSource
}

// Hub is one history host's event log. It implements worker.ChangeSink.
type Hub struct {
	opts  Options
	epoch uint64

	mu   sync.Mutex
	seq  uint64
	ring []Event // ring[seq % len]: the last len(ring) events, states encoded
	// trimmed is the number of the last event dropped from the ring for its age: the ring holds
	// events trimmed+1 .. seq (and at most len(ring) of them).
	trimmed  uint64
	trimming clock.Timer
	subs     map[*Subscription]struct{}
	// unwatchedSince is when the hub last had no subscription: its start, or when the last
	// one closed. keeping says whether the ring keeps events; it is cleared once the hub has
	// had no subscription for RingRetention (idleLocked) and set by the next Subscribe. Read
	// without the lock by Publish, to encode outside it only the states the ring will keep:
	// a commit that wrote nothing (a heartbeat answered from memory) is encoded when asked.
	unwatchedSince time.Time
	keeping        atomic.Bool
	// active maps each ACTIVE worker, by namespace and instance key, to its host's entry in
	// hosts, which counts the host's ACTIVE workers. A worker costs one entry of a key and a
	// pointer, half of one keyed by namespace and key with the host's name beside it; a fleet
	// of one worker per host costs no map per host.
	active byNamespace[*hostCount]
	hosts  map[hostRef]*hostCount
	peaks  struct{ hosts int }
	// Relaying hubs only: the number of the last Gap marker (no cursor before it resumes), and
	// how far each worker's relayed states went, by namespace and instance key, to drop a late
	// event. A mark, not the state: a frontend relays every worker of the cluster. Keyed by the
	// event's own strings, and by namespace, so that a worker keeps no namespace string of its
	// own (each event decoded from the wire brings one).
	gapSeq  uint64
	relayed byNamespace[progress]
}

type hostRef struct{ namespaceID, host string }

// hostCount is a host of a namespace and its number of ACTIVE workers.
type hostCount struct {
	host string
	n    int
}

var _ worker.ChangeSink = (*Hub)(nil)

// NewHub returns an empty hub. Its epoch (the time it was made) tells a cursor of this hub
// from one of an earlier process.
func NewHub(opts Options) *Hub {
	if opts.RingSize <= 0 {
		opts.RingSize = 8192
	}
	if opts.BufferSize <= 0 {
		opts.BufferSize = 16384
	}
	if opts.TimeSource == nil {
		opts.TimeSource = clock.NewRealTimeSource()
	}
	if opts.RingRetention <= 0 {
		opts.RingRetention = time.Minute
	}
	h := &Hub{
		opts:           opts,
		epoch:          uint64(time.Now().UnixNano()),
		ring:           make([]Event, opts.RingSize),
		subs:           make(map[*Subscription]struct{}),
		unwatchedSince: opts.TimeSource.Now(),
		active:         make(byNamespace[*hostCount]),
		hosts:          make(map[hostRef]*hostCount),
		relayed:        make(byNamespace[progress]),
	}
	h.keeping.Store(true)
	return h
}

// Epoch identifies this hub's log; a cursor of another epoch cannot resume.
func (h *Hub) Epoch() uint64 { return h.epoch }

// Publish implements worker.ChangeSink: it numbers the changes (and the host transitions they
// cause) and hands them to every watcher of their namespace. It never blocks.
func (h *Hub) Publish(changes ...worker.Change) {
	now := h.opts.TimeSource.Now()
	// The ring keeps each state as the store does: the bytes the commit wrote, or for a
	// heartbeat answered from memory, encoded here once for the ring and the engine's cache
	// (worker.Change.Encoded). Encoded before the lock, which every shard's commits take, and
	// only while the ring keeps anything.
	var small [2][]byte
	encoded := small[:0]
	if h.keeping.Load() {
		for _, c := range changes {
			var b []byte
			if c.Encoded != nil {
				b = c.Encoded()
			}
			if b == nil {
				b = encodeState(c.State) // a deletion, or a change not made from a commit
			}
			encoded = append(encoded, b)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.idleLocked(now)
	for i, c := range changes {
		var b []byte
		if i < len(encoded) {
			b = encoded[i]
		}
		host := c.State.GetLastHeartbeat().GetHostInfo().GetHostName()
		h.append(Event{
			Time: now, Kind: Kind(c.Kind), NamespaceID: c.NamespaceID, WorkerInstanceKey: c.WorkerInstanceKey,
			HostName: host, State: c.State, Count: c.Count,
		}, b)
		h.trackHost(c, host, now)
	}
	h.trimLocked(now)
}

// idleLocked stops the ring once nobody has watched for RingRetention: a watcher that left
// earlier resyncs anyway (its cursor is older than the events the ring keeps), so a host
// whose live view nobody opens neither encodes nor holds its workers' states for it. The
// events are still numbered, as dropped at once; the next Subscribe starts the ring again.
func (h *Hub) idleLocked(now time.Time) {
	if !h.keeping.Load() || len(h.subs) > 0 || now.Sub(h.unwatchedSince) < h.opts.RingRetention {
		return
	}
	h.keeping.Store(false)
	clear(h.ring)
	h.trimmed = h.seq
}

// encodeState is a state as the ring keeps it; nil (keep it decoded) when there is none, or
// in the impossible case that a committed state does not encode.
func encodeState(st *workerpb.WorkerState) []byte {
	if st == nil {
		return nil
	}
	b, err := proto.Marshal(st)
	if err != nil {
		return nil
	}
	return b
}

// trimLocked drops the events older than RingRetention from the ring and, while it holds
// any, arms a timer to do it again when the oldest comes of age, so that a host gone quiet
// lets go of them too.
func (h *Hub) trimLocked(now time.Time) {
	size := uint64(len(h.ring))
	if h.seq > size && h.trimmed < h.seq-size {
		h.trimmed = h.seq - size // overwritten already
	}
	horizon := now.Add(-h.opts.RingRetention)
	held := h.seq - h.trimmed
	for h.trimmed < h.seq {
		i := (h.trimmed + 1) % size
		if h.ring[i].Time.After(horizon) {
			break
		}
		h.ring[i] = Event{}
		h.trimmed++
	}
	if h.trimmed == h.seq && held >= 1024 {
		memrelease.Note() // a burst's events (and worker states) are all gone
	}
	if h.trimmed == h.seq || h.trimming != nil {
		return
	}
	wait := h.ring[(h.trimmed+1)%size].Time.Sub(horizon)
	h.trimming = h.opts.TimeSource.AfterFunc(wait, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.trimming = nil
		h.trimLocked(h.opts.TimeSource.Now())
	})
}

// trackHost updates the host's count of ACTIVE workers and appends the host's going online
// (its first ACTIVE worker) or offline (its last one left).
func (h *Hub) trackHost(c worker.Change, host string, now time.Time) {
	prev, _ := h.active.get(c.NamespaceID, c.WorkerInstanceKey)
	if c.State.GetStatus() == workerpb.WorkerStatus_WORKER_STATUS_ACTIVE && c.Kind != worker.ChangeDeleted {
		if prev != nil && prev.host == host {
			return
		}
		if prev != nil {
			h.leaveHost(c.NamespaceID, prev, now) // it reports from another host now
		}
		hk := hostRef{c.NamespaceID, host}
		hc := h.hosts[hk]
		if hc == nil {
			hc = &hostCount{host: host}
			h.hosts[hk] = hc
			h.peaks.hosts = max(h.peaks.hosts, len(h.hosts))
		}
		hc.n++
		h.active.set(c.NamespaceID, c.WorkerInstanceKey, hc)
		// A heartbeat of a worker that was ACTIVE before this hub started (a restart) counts
		// it without announcing a host the watchers' snapshot already shows online.
		if hc.n == 1 && c.Kind != worker.ChangeHeartbeat {
			h.append(Event{Time: now, Kind: KindHostOnline, NamespaceID: c.NamespaceID, HostName: host}, nil)
		}
		return
	}
	if prev == nil {
		return
	}
	h.active.remove(c.NamespaceID, c.WorkerInstanceKey)
	h.leaveHost(c.NamespaceID, prev, now)
	h.hosts, _ = memrelease.ShrinkMap(h.hosts, &h.peaks.hosts, memrelease.ShrinkMapMin)
}

func (h *Hub) leaveHost(namespaceID string, hc *hostCount, now time.Time) {
	if hc.n--; hc.n > 0 {
		return
	}
	delete(h.hosts, hostRef{namespaceID, hc.host})
	h.append(Event{Time: now, Kind: KindHostOffline, NamespaceID: namespaceID, HostName: hc.host}, nil)
}

// append numbers ev, keeps it in the ring (with its state as encoded, when given), and offers
// it to every watcher.
func (h *Hub) append(ev Event, encoded []byte) {
	h.seq++
	ev.Seq = h.seq
	if !h.keeping.Load() {
		h.trimmed = h.seq // idle: nobody to offer it to, and no cursor to resume
		return
	}
	if encoded == nil && ev.State != nil {
		encoded = encodeState(ev.State) // the ring started again since the caller looked
	}
	kept := ev
	if encoded != nil {
		kept.State, kept.encoded = nil, encoded
	}
	h.ring[h.seq%uint64(len(h.ring))] = kept
	for s := range h.subs {
		s.offer(ev)
	}
}

// replay offers s the events seq from..through of the ring (hub.mu held), their states still
// encoded: decoding thousands of them here would hold up every commit's Publish.
func (h *Hub) replay(s *Subscription, from, through uint64) {
	for seq := from; seq <= through; seq++ {
		s.offer(h.ring[seq%uint64(len(h.ring))])
	}
}

// decodeReplayed gives the replayed events among events their states; false if one does not
// decode (it cannot: the hub encoded it), and the watcher must resync rather than see a worker
// without its state.
func decodeReplayed(events []Event) bool {
	for i := range events {
		if events[i].State != nil || events[i].encoded == nil {
			continue
		}
		st := &workerpb.WorkerState{}
		if err := proto.Unmarshal(events[i].encoded, st); err != nil {
			return false
		}
		events[i].State, events[i].encoded = st, nil
	}
	return true
}

// Relay appends events of another hub's log (a history host's, read by a frontend): worker
// events in their order, except one older than a state of the same worker already relayed (a
// shard moved and its old owner's stream lagged behind the new owner's: see Older). Host
// events are dropped: this hub derives its own from the workers of every host it relays, so
// a machine is online while any of its workers is ACTIVE on any shard of the cluster. Events
// keep their time.
func (h *Hub) Relay(events ...Event) {
	// Relayed events come decoded from the wire: the ring's copies are encoded before the
	// lock, which every history host's stream takes.
	var encoded [][]byte
	if h.keeping.Load() {
		encoded = make([][]byte, len(events))
		for i, ev := range events {
			encoded[i] = encodeState(ev.State)
		}
	}
	now := h.opts.TimeSource.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.idleLocked(now)
	for i, ev := range events {
		if ev.WorkerInstanceKey == "" || ev.State == nil || ev.Kind >= KindHostOnline {
			continue
		}
		if !h.relayLocked(ev) {
			continue
		}
		host := ev.State.GetLastHeartbeat().GetHostInfo().GetHostName()
		ev.HostName = host
		var b []byte
		if i < len(encoded) {
			b = encoded[i]
		}
		h.append(ev, b)
		c := worker.Change{Kind: worker.ChangeKind(ev.Kind), NamespaceID: ev.NamespaceID, WorkerInstanceKey: ev.WorkerInstanceKey, State: ev.State, Count: ev.Count}
		h.trackHost(c, host, ev.Time)
	}
	// As in Publish: a frontend's ring, which relays every host's events, lets go of them
	// after RingRetention too, instead of keeping the last burst's states for good.
	h.trimLocked(now)
}

// relayLocked records how far ev (a worker's event) took its worker, and reports whether it is
// to be relayed: false if a state of the worker already relayed is newer.
func (h *Hub) relayLocked(ev Event) bool {
	if last, ok := h.relayed.get(ev.NamespaceID, ev.WorkerInstanceKey); ok && progressOf(ev.State).before(last) {
		return false
	}
	if ev.Kind == KindDeleted {
		h.relayed.remove(ev.NamespaceID, ev.WorkerInstanceKey)
	} else {
		h.relayed.set(ev.NamespaceID, ev.WorkerInstanceKey, progressOf(ev.State))
	}
	return true
}

// Gap records that events were lost before the next one (a relayed host's stream broke, fell
// behind or restarted): every watcher must resync, told reason, and no cursor from before
// resumes. The host bookkeeping starts over, as in a new hub: it learns the ACTIVE workers
// again from their next heartbeats.
func (h *Hub) Gap(reason string) {
	now := h.opts.TimeSource.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	h.gapSeq = h.seq
	h.ring[h.seq%uint64(len(h.ring))] = Event{Seq: h.seq, Time: now, Kind: KindGap}
	for s := range h.subs {
		s.lose(reason)
	}
	h.active = make(byNamespace[*hostCount])
	h.hosts = make(map[hostRef]*hostCount)
	h.relayed = make(byNamespace[progress])
	h.peaks.hosts = 0
}

// Older reports whether a is an earlier state of a worker than b. A worker's states only move
// forward: every accepted heartbeat counts up heartbeat_count, every lapse inactive_epoch, and
// with both equal the status goes ACTIVE → INACTIVE → CLEANED_UP. (A change that moves none
// of them, a drain request or an acknowledgement, is never older.)
func Older(a, b *workerpb.WorkerState) bool { return progressOf(a).before(progressOf(b)) }

// progress is how far a worker's state went, in the order Older compares.
type progress struct {
	heartbeats, inactiveEpoch int64
	status                    int
}

func progressOf(s *workerpb.WorkerState) progress {
	return progress{s.GetHeartbeatCount(), s.GetInactiveEpoch(), statusRank(s.GetStatus())}
}

func (p progress) before(q progress) bool {
	if p.heartbeats != q.heartbeats {
		return p.heartbeats < q.heartbeats
	}
	if p.inactiveEpoch != q.inactiveEpoch {
		return p.inactiveEpoch < q.inactiveEpoch
	}
	return p.status < q.status
}

func statusRank(s workerpb.WorkerStatus) int {
	switch s {
	case workerpb.WorkerStatus_WORKER_STATUS_INACTIVE:
		return 1
	case workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP:
		return 2
	}
	return 0
}

// HostsOnline returns the namespace's hosts that have an ACTIVE worker, as far as this hub
// has seen (for tests and diagnostics).
func (h *Hub) HostsOnline(namespaceID string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for hk := range h.hosts {
		if hk.namespaceID == namespaceID {
			out = append(out, hk.host)
		}
	}
	return out
}

// Subscribe opens a watcher of one namespace ("": every namespace). With epoch 0 (no cursor) it starts at the next
// event; otherwise it resumes after event number after (0: before the first) of that epoch, and
// resumed is false when
// the hub no longer holds every event since: the watcher then starts at the next event and the
// caller must resync (take a fresh snapshot). Position is the number of the last event before
// the subscription's first: the cursor of a snapshot taken now.
func (h *Hub) Subscribe(namespaceID string, epoch, after uint64, heartbeatEvery time.Duration) (s *Subscription, position uint64, resumed bool) {
	s = &Subscription{
		hub: h, namespaceID: namespaceID, heartbeatEvery: heartbeatEvery,
		notify:   make(chan struct{}, 1),
		lastSent: make(map[string]time.Time),
		pending:  make(map[string]Event),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	oldest := uint64(1)
	if h.seq > uint64(len(h.ring)) {
		oldest = h.seq - uint64(len(h.ring)) + 1
	}
	oldest = max(oldest, h.trimmed+1)
	switch {
	case epoch == 0:
	case epoch == h.epoch && after <= h.seq && after+1 >= oldest && after >= h.gapSeq:
		resumed = true
		h.replay(s, after+1, h.seq)
	}
	h.subs[s] = struct{}{}
	h.keeping.Store(true)
	if resumed {
		return s, after, true
	}
	return s, h.seq, epoch == 0
}

// SubscribeLog opens a subscription to the whole log (every namespace, no coalescing) for
// another hub to relay (WorkerWatchService): after event after of epoch when this hub still
// holds every event since; otherwise (epoch 0, a cursor of another epoch or one too old) from
// the oldest event it holds, or as many of the latest as a buffer takes. Resumed says nothing
// was skipped: the cursor resumed, or epoch was 0 and the log starts at its first event.
// Position is the number of the event before the first one the subscription gets.
func (h *Hub) SubscribeLog(epoch, after uint64) (s *Subscription, position uint64, resumed bool) {
	s = &Subscription{hub: h, notify: make(chan struct{}, 1), lastSent: make(map[string]time.Time), pending: make(map[string]Event)}
	h.mu.Lock()
	defer h.mu.Unlock()
	oldest := uint64(1)
	if h.seq > uint64(len(h.ring)) {
		oldest = h.seq - uint64(len(h.ring)) + 1
	}
	from := oldest
	switch {
	case epoch == h.epoch && after <= h.seq && after+1 >= oldest && after >= h.gapSeq:
		from, resumed = after+1, true
	case epoch == 0:
		resumed = oldest == 1 && h.gapSeq == 0
	}
	// Leave room in the buffer: a replay that fills it would overflow at once.
	if limit := uint64(h.opts.BufferSize / 2); h.seq >= limit && from+limit <= h.seq {
		from, resumed = h.seq-limit+1, false
	}
	h.replay(s, from, h.seq)
	h.subs[s] = struct{}{}
	h.keeping.Store(true)
	return s, from - 1, resumed
}

// Subscription is one watcher's bounded buffer.
type Subscription struct {
	hub            *Hub
	namespaceID    string
	heartbeatEvery time.Duration
	notify         chan struct{}

	// Under hub.mu.
	buf      []Event
	last     map[string]int // worker → index in buf of its last event
	overflow bool
	reason   string // why the watcher must resync, once overflow

	// Owned by the reader (Next).
	lastSent   map[string]time.Time
	pending    map[string]Event // coalesced heartbeats waiting for their turn
	lastCursor uint64
	lastPrune  time.Time
}

// offer queues ev (hub.mu held). A full buffer is dropped whole and marks the watcher as
// overflowed: it must resync, and its memory stays bounded.
func (s *Subscription) offer(ev Event) {
	if (s.namespaceID != "" && ev.NamespaceID != s.namespaceID) || s.overflow || ev.Kind == KindGap {
		return
	}
	if ev.WorkerInstanceKey != "" {
		// A heartbeat replaces the worker's previous one still in the buffer if nothing of that
		// worker came after it: a watcher that is busy (sending a snapshot, a slow client) holds
		// at most one heartbeat per worker, not one per heartbeat.
		if i, ok := s.last[ev.WorkerInstanceKey]; ok && ev.Kind == KindHeartbeat && s.buf[i].Kind == KindHeartbeat {
			s.buf[i] = ev
			s.notifyReader()
			return
		}
	}
	if len(s.buf) >= s.hub.opts.BufferSize {
		s.lose("the watcher fell behind")
		return
	}
	if ev.WorkerInstanceKey != "" {
		if s.last == nil {
			s.last = make(map[string]int)
		}
		s.last[ev.WorkerInstanceKey] = len(s.buf)
	}
	s.buf = append(s.buf, ev)
	s.notifyReader()
}

// lose drops the buffer and marks the watcher as having to resync (hub.mu held).
func (s *Subscription) lose(reason string) {
	if s.overflow {
		return
	}
	s.buf, s.last, s.overflow, s.reason = nil, nil, true, reason
	s.notifyReader()
}

// ResyncReason says why Next reported an overflow.
func (s *Subscription) ResyncReason() string {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.reason
}

func (s *Subscription) notifyReader() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Close ends the subscription.
func (s *Subscription) Close() {
	h := s.hub
	now := h.opts.TimeSource.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; !ok {
		return
	}
	delete(h.subs, s)
	if len(h.subs) == 0 {
		h.unwatchedSince = now
	}
}

// Next waits for events and returns them in order, with at most one HEARTBEAT per worker per
// heartbeatEvery (the latest; one held back goes out when its turn comes, unless a later event
// of the worker made it moot). Cursor is the number of the last event accounted for (sent,
// held back or dropped as coalesced). Overflow means the watcher fell behind: events were lost
// and it must resync (take a new subscription and snapshot).
func (s *Subscription) Next(ctx context.Context) (events []Event, cursor uint64, overflow bool, err error) {
	ts := s.hub.opts.TimeSource
	for {
		s.hub.mu.Lock()
		batch, overflow := s.buf, s.overflow
		s.buf, s.last = nil, nil
		s.hub.mu.Unlock()
		if overflow {
			return nil, 0, true, nil
		}
		now := ts.Now()
		for _, ev := range batch {
			cursor = max(cursor, ev.Seq) // a replaced heartbeat carries a later number
			if ev.Kind == KindHeartbeat && s.heartbeatEvery > 0 {
				if last, ok := s.lastSent[ev.WorkerInstanceKey]; ok && now.Sub(last) < s.heartbeatEvery {
					s.pending[ev.WorkerInstanceKey] = ev
					continue
				}
				s.lastSent[ev.WorkerInstanceKey] = now
			} else if ev.WorkerInstanceKey != "" {
				delete(s.pending, ev.WorkerInstanceKey)
				if ev.Kind != KindHeartbeat {
					// The next heartbeat after a transition shows at once.
					delete(s.lastSent, ev.WorkerInstanceKey)
				}
			}
			events = append(events, ev)
		}
		var wake time.Time
		for key, ev := range s.pending {
			due := s.lastSent[key].Add(s.heartbeatEvery)
			if !now.Before(due) {
				delete(s.pending, key)
				s.lastSent[key] = now
				events = append(events, ev)
			} else if wake.IsZero() || due.Before(wake) {
				wake = due
			}
		}
		s.prune(now)
		if !decodeReplayed(events) {
			s.hub.mu.Lock()
			s.lose("the hub's log could not be read")
			s.hub.mu.Unlock()
			return nil, 0, true, nil
		}
		if len(events) > 0 {
			if cursor == 0 {
				cursor = s.lastCursor
			}
			s.lastCursor = max(s.lastCursor, cursor)
			return events, s.lastCursor, false, nil
		}
		if cursor > 0 {
			s.lastCursor = max(s.lastCursor, cursor)
		}
		var timer <-chan time.Time
		stop := func() {}
		if !wake.IsZero() {
			ch, t := ts.NewTimerAt(wake)
			timer, stop = ch, func() { t.Stop() }
		}
		select {
		case <-ctx.Done():
			stop()
			return nil, 0, false, ctx.Err()
		case <-s.notify:
		case <-timer:
		}
		stop()
	}
}

// prune forgets when heartbeats of workers went out once that no longer holds any back, so a
// long watch of a churning fleet keeps no entry per worker it ever saw.
func (s *Subscription) prune(now time.Time) {
	if len(s.lastSent) < 1024 || now.Sub(s.lastPrune) < s.heartbeatEvery {
		return
	}
	s.lastPrune = now
	for key, last := range s.lastSent {
		if _, held := s.pending[key]; !held && now.Sub(last) >= s.heartbeatEvery {
			delete(s.lastSent, key)
		}
	}
}
