package history

import (
	"encoding/json"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/admission"
	"github.com/vigilhq/vigil/common/clock"
)

// ClusterLoad is the load signal the expiry brake of a host reads: the host's own (its
// Admission) and that of the other hosts of its cluster, as each reports it with its
// membership renewal (StoreMonitor carries the reports in the membership rows, every
// membership heartbeat).
//
// A worker's heartbeats reach its shard's owner through whichever host its SDK is connected to.
// A host that refuses them (its admission, or its frontend's early refusal, which counts
// against its admission) loses them before the owner sees anything, and an owner that weighed
// only its own refusals would read the silence as a death: with one host of three refusing
// half of what it receives, a third of the fleet loses all three beats of a lease with odds of
// one in eight. So a host counts as behind while any host of its cluster is, and weighs a
// silence by the largest share any host refused in each second: a worker connected to the
// busiest host lost its heartbeats at that host's share.
//
// On a host that is not part of a cluster it is its Admission, unchanged.
type ClusterLoad struct {
	local  *Admission
	ts     clock.TimeSource
	logger *zap.Logger

	mu     sync.Mutex
	remote map[string]*remoteLoad
	warned bool
}

var _ admission.LoadSignal = (*ClusterLoad)(nil)

// remoteLoad is what another host last reported.
type remoteLoad struct {
	// delay is its HeartbeatQueueDelay when it reported; it counts while the host is a live
	// member (alive), and its counts for as long as they are within the record.
	delay time.Duration
	alive bool
	// counts are its heartbeats served and refused by second, from its first counted second
	// (from) to the newest reported (last).
	counts     heartbeatRing
	from, last int64
	// retriesUntil is until when heartbeats it refused may still be retried.
	retriesUntil time.Time
}

// loadReportSeconds is how many seconds of counts a report carries: reports come every
// membership heartbeat (1 s), so a few missed renewals lose nothing; a host silent for longer
// than its membership TTL is dead anyway.
const loadReportSeconds = 10

// loadReport is a host's report, as JSON in its membership row: small (a few hundred bytes),
// and readable with psql.
type loadReport struct {
	// Delay is the host's HeartbeatQueueDelay, in nanoseconds.
	Delay int64 `json:"d"`
	// From is the first second it counted (it started then).
	From int64 `json:"f"`
	// Counts are {second, served, refused} of its last loadReportSeconds seconds.
	Counts [][3]int64 `json:"c,omitempty"`
	// RetriesUntil is its RetriesPendingUntil, in Unix nanoseconds; 0 if none.
	RetriesUntil int64 `json:"r,omitempty"`
}

// NewClusterLoad returns the load signal of a host whose own admission is local.
func NewClusterLoad(local *Admission, ts clock.TimeSource, logger *zap.Logger) *ClusterLoad {
	return &ClusterLoad{local: local, ts: ts, logger: logger, remote: make(map[string]*remoteLoad)}
}

// HeartbeatQueueDelay implements admission.LoadSignal: the largest of this host's own and the
// live other hosts' last reported.
func (c *ClusterLoad) HeartbeatQueueDelay() time.Duration {
	d := c.local.HeartbeatQueueDelay()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.remote {
		if r.alive {
			d = max(d, r.delay)
		}
	}
	return d
}

// RefusedShare implements admission.LoadSignal: the mean, over the seconds of [from, to) in
// which any host of the cluster served or refused heartbeats, of the largest share a host
// refused in that second. Unknown (false) when no host's record says anything of the span.
// Without reports from other hosts it is this host's own, as on a host of no cluster.
func (c *ClusterLoad) RefusedShare(from, to time.Time) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.remote) == 0 {
		return c.local.RefusedShare(from, to)
	}
	first, now := from.Unix(), c.ts.Now().Unix()
	last := min(to.Add(-time.Nanosecond).Unix(), now)
	if last < first || first <= now-heartbeatRecord {
		return 0, false // no record reaches back to from, or nothing of the span has passed
	}
	// The largest share of each second of the span, -1 where no host saw a heartbeat.
	largest := make([]float64, last-first+1)
	for i := range largest {
		largest[i] = -1
	}
	note := func(second int64, share float64) {
		largest[second-first] = max(largest[second-first], share)
	}
	c.local.eachShare(from, to, note)
	for _, r := range c.remote {
		if first >= r.from {
			r.counts.each(first, min(last, r.last), func(h heartbeatCount) { note(h.second, h.refusedShare()) })
		}
	}
	var sum float64
	seconds := 0
	for _, share := range largest {
		if share >= 0 {
			sum += share
			seconds++
		}
	}
	if seconds == 0 {
		return 0, false
	}
	return sum / float64(seconds), true
}

// RetriesPendingUntil implements admission.LoadSignal: the latest of this host's own and the
// other hosts' last reported, dead hosts' included: the heartbeats a host refused are retried
// against another host once it is gone.
func (c *ClusterLoad) RetriesPendingUntil() time.Time {
	until := c.local.RetriesPendingUntil()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.remote {
		if r.retriesUntil.After(until) {
			until = r.retriesUntil
		}
	}
	return until
}

// Report is this host's report for the others, for its membership row.
func (c *ClusterLoad) Report() []byte {
	b, err := json.Marshal(c.local.report())
	if err != nil {
		return nil // not expected: a struct of integers
	}
	return b
}

// Received takes the other hosts' reports, by host ID, as their membership rows had them when
// the members were last read: every live host but this one. A host missing from it is gone;
// its counts stay for the silences they may explain, its delay no longer counts.
func (c *ClusterLoad) Received(reports map[string][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.ts.Now().Unix()
	for id, r := range c.remote {
		_, r.alive = reports[id]
		if !r.alive && r.last <= now-heartbeatRecord {
			delete(c.remote, id)
		}
	}
	for id, raw := range reports {
		if len(raw) == 0 {
			continue // a host of an older version, which does not report
		}
		var rep loadReport
		if err := json.Unmarshal(raw, &rep); err != nil {
			if !c.warned {
				c.warned = true
				c.logger.Warn("a host's load report does not decode; its refusals are not weighed here",
					zap.String("host", id), zap.Error(err))
			}
			continue
		}
		r := c.remote[id]
		if r == nil {
			r = &remoteLoad{}
			c.remote[id] = r
		}
		r.alive, r.delay, r.from = true, time.Duration(max(rep.Delay, 0)), rep.From
		if rep.RetriesUntil > 0 {
			r.retriesUntil = time.Unix(0, rep.RetriesUntil)
		}
		for _, cnt := range rep.Counts {
			second := cnt[0]
			if second <= now-heartbeatRecord || cnt[1] < 0 || cnt[2] < 0 {
				continue
			}
			*r.counts.at(second) = heartbeatCount{second: second, served: int(cnt[1]), refused: int(cnt[2])}
			r.last = max(r.last, second)
		}
	}
}
