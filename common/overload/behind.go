package overload

import (
	"encoding/json"
	"time"
)

// Behind implements Signal: this host is behind (LocalBehind), or another live host of its
// cluster said it was in its last membership renewal (Received).
//
// A worker's heartbeats reach its shard's owner through whichever host its SDK is connected
// to. A host that refuses them loses them before the owner sees anything, and an owner that
// looked only at itself would read the silence as a death; so every host's brake holds while
// any host is behind.
func (c *Controller) Behind() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.localBehindLocked() || c.behind.peerBehind
}

// LocalBehind says whether this host is behind: its heartbeats lately spent longer than
// BehindDelay in history (waiting for a slot, then for their write), or one waiting now has,
// or more than BehindRefusedShare of the last behindWindow's heartbeats (at least
// behindMinRefused of them) were refused or dropped, wherever (in the transport, by admission,
// or past their deadline), or renewed their leases late (RenewedLate).
//
// Late renewals see what the other measures cannot: a heartbeat that waited in the socket's
// buffers before gRPC read it, or behind its client's backoff after a refusal, looks fresh to
// history, whose clock for it starts when its headers are read. Its lease does not: when such
// waits grow, the heartbeats that get through renew leases that have almost run out, an
// interval or more before the first lease of a live worker runs out whole.
func (c *Controller) LocalBehind() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.localBehindLocked()
}

func (c *Controller) localBehindLocked() bool {
	now := c.ts.Now()
	c.lateLocked(now)
	if limit := c.cfg.BehindDelay(); limit > 0 {
		if c.behind.recentDelay(now) > limit || c.oldestHeartbeatWaitLocked(now) > limit {
			return true
		}
	}
	if share := c.cfg.BehindRefusedShare(); share > 0 {
		refused, total := c.behind.recentCounts(now)
		if refused >= behindMinRefused && float64(refused) > share*float64(total) {
			return true
		}
	}
	return false
}

func (c *Controller) oldestHeartbeatWaitLocked(now time.Time) time.Duration {
	var oldest time.Duration
	if c.queuedByCls[ClassHeartbeat] == 0 {
		return 0 // the brake asks at every expiry: no walk of every shard while none waits
	}
	for _, g := range c.gates {
		if q := g.waiting[ClassHeartbeat]; len(q) > 0 {
			oldest = max(oldest, now.Sub(q[0].enqueued))
		}
	}
	return oldest
}

// RenewedLate implements Signal. It only counts: the count joins the window where the
// controller's lock is held anyway (lateLocked), since an overloaded host renews most leases
// late, from under the brake's lock.
func (c *Controller) RenewedLate() { c.lateRenewals.Add(1) }

// lateLocked moves the late renewals counted since into now's second.
func (c *Controller) lateLocked(now time.Time) {
	if n := c.lateRenewals.Swap(0); n > 0 {
		c.behind.late(now, int(n))
	}
}

// Report is what this host tells the other hosts of its cluster with its membership renewal
// (history.StoreMonitor): whether it is behind, as JSON, readable with psql.
func (c *Controller) Report() []byte {
	b, err := json.Marshal(peerReport{Behind: c.LocalBehind()})
	if err != nil {
		return nil // not expected: a struct of a bool
	}
	return b
}

// Received takes the other live hosts' reports, as their membership rows had them when the
// members were last read. A report that does not decode (a host of another version) says
// nothing.
func (c *Controller) Received(reports map[string][]byte) {
	behind := false
	for _, raw := range reports {
		var r peerReport
		if len(raw) > 0 && json.Unmarshal(raw, &r) == nil && r.Behind {
			behind = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.behind.peerBehind = behind
}

// peerReport is a host's report in its membership row.
type peerReport struct {
	Behind bool `json:"behind"`
}

// behindWindow is how many seconds of heartbeats the refused share is taken over, and
// behindMinRefused how many refusals in them it takes at least: a share over a few hundred
// heartbeats (a fraction of a second in a large fleet) turned a passing burst of refusals into
// "behind", and every catch-up after it holds expiries for another lease.
const (
	behindWindow     = 5
	behindMinRefused = 5
)

// behindSignal is what LocalBehind reads: the smoothed time heartbeats spent in history, and
// the heartbeats served, refused and late in each of the last behindWindow seconds. It is not
// safe for concurrent use; the Controller holds its lock.
type behindSignal struct {
	delay   time.Duration
	delayAt time.Time
	seconds [behindWindow]secondCount
	// peerBehind: another live host of the cluster said it was behind.
	peerBehind bool
}

type secondCount struct {
	second int64
	// late counts the served heartbeats that renewed their leases late: counted in served as
	// well, and in the refused share as refused.
	served, refused, late int
}

func newBehindSignal(now time.Time) behindSignal { return behindSignal{delayAt: now} }

// served notes a heartbeat served after spending took in history.
func (b *behindSignal) served(now time.Time, took time.Duration) {
	// Exponentially smoothed over roughly the last 20 heartbeats.
	b.delay += (took - b.delay) / 20
	b.delayAt = now
	b.count(now, 1, false)
}

// count notes n heartbeats served or refused in now's second.
func (b *behindSignal) count(now time.Time, n int, refused bool) {
	s := b.secondOf(now)
	if refused {
		s.refused += n
	} else {
		s.served += n
	}
}

// late notes n served heartbeats that renewed their leases late, in now's second.
func (b *behindSignal) late(now time.Time, n int) { b.secondOf(now).late += n }

// secondOf returns now's second's counts, begun anew if they held an older second's.
func (b *behindSignal) secondOf(now time.Time) *secondCount {
	second := now.Unix()
	s := &b.seconds[(second%behindWindow+behindWindow)%behindWindow]
	if s.second != second {
		*s = secondCount{second: second}
	}
	return s
}

// recentDelay is the smoothed delay, halved for every second without a heartbeat served: a
// delay measured long ago says nothing about now.
func (b *behindSignal) recentDelay(now time.Time) time.Duration {
	d := b.delay
	for i := time.Duration(0); i < now.Sub(b.delayAt)/time.Second && d > 0; i++ {
		d /= 2
	}
	return d
}

// recentCounts returns the heartbeats refused or late, and all heartbeats, of the last
// behindWindow seconds.
func (b *behindSignal) recentCounts(now time.Time) (refused, total int) {
	second := now.Unix()
	for _, s := range b.seconds {
		if s.second > second-behindWindow && s.second <= second {
			// Late renewals join the second they are folded in, which may be the one after
			// their heartbeats were served: no second counts more late than served.
			refused += s.refused + min(s.late, s.served)
			total += s.served + s.refused
		}
	}
	return refused, total
}
