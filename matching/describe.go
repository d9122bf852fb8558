package matching

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Poller is one worker identity that polled an activity task queue recently, as
// DescribeTaskQueue lists it.
type Poller struct {
	Identity string
	// WorkerInstanceKey is the key of the SDK worker the identity's last poll carried (may be
	// empty). Its ShutdownWorker removes the entry at once.
	WorkerInstanceKey string
	// LastAccessTime is when the identity's last poll arrived.
	LastAccessTime time.Time
	// RatePerSecond is the rate limit the worker's last poll asked for (task_queue_metadata's
	// max_tasks_per_second); 0 when it set none.
	RatePerSecond float64
}

// QueueDescription is what matching knows of one activity task queue: who polled it within
// PollerHistoryTTL, and its backlog.
type QueueDescription struct {
	// Pollers are ordered by identity.
	Pollers []Poller
	// BacklogCount is the number of tasks queued and not yet handed to a poll.
	BacklogCount int64
	// BacklogAge is how long the next task to dispatch has waited since its scheduled time.
	BacklogAge time.Duration
	// TasksAddRate and TasksDispatchRate are tasks per second over about the last
	// rateWindowSpan: tasks accepted by AddActivityTask (including those handed straight to a
	// waiting poll) and tasks handed to polls.
	TasksAddRate, TasksDispatchRate float64
	// Owner is the ID of the host that owns the queue; empty from a Matcher alone (Client fills
	// it).
	Owner string
}

// pollerRecord is one (queue, identity) in the poller history.
type pollerRecord struct {
	queue      queueKey
	identity   string
	worker     workerKey // instanceKey empty when the poll carried none
	lastAccess time.Time
	rps        float64
	// elem is the record in the matcher's pollerOrder.
	elem *list.Element
}

// recordPoller notes that poll arrived now. Call under m.mu.
func (m *Matcher) recordPoller(qk queueKey, poll ActivityPoll, now time.Time) {
	// Keyed by identity, as Temporal keys its poller history.
	byIdentity := m.pollers[qk]
	if byIdentity == nil {
		byIdentity = make(map[string]*pollerRecord)
		m.pollers[qk] = byIdentity
	}
	rec := byIdentity[poll.Identity]
	if rec == nil {
		rec = &pollerRecord{queue: qk, identity: poll.Identity}
		rec.elem = m.pollerOrder.PushBack(rec)
		byIdentity[poll.Identity] = rec
	}
	wk := workerKey{qk.namespaceID, poll.WorkerInstanceKey}
	if rec.worker != wk {
		m.unindexPoller(rec)
		rec.worker = wk
		if wk.instanceKey != "" {
			recs := m.pollersByWorker[wk]
			if recs == nil {
				recs = make(map[*pollerRecord]struct{})
				m.pollersByWorker[wk] = recs
			}
			recs[rec] = struct{}{}
		}
	}
	rec.lastAccess = now
	rec.rps = poll.RatePerSecond
	m.pollerOrder.MoveToBack(rec.elem)
}

// forgetPoller removes rec from the poller history. Call under m.mu.
func (m *Matcher) forgetPoller(rec *pollerRecord) {
	m.pollerOrder.Remove(rec.elem)
	if byIdentity := m.pollers[rec.queue]; byIdentity != nil {
		delete(byIdentity, rec.identity)
		if len(byIdentity) == 0 {
			delete(m.pollers, rec.queue)
		}
	}
	m.unindexPoller(rec)
}

func (m *Matcher) unindexPoller(rec *pollerRecord) {
	if rec.worker.instanceKey == "" {
		return
	}
	if recs := m.pollersByWorker[rec.worker]; recs != nil {
		delete(recs, rec)
		if len(recs) == 0 {
			delete(m.pollersByWorker, rec.worker)
		}
	}
}

// forgetUnownedPollers drops the poller history of the queues this host no longer owns: their
// workers poll the new owner, which records them anew. Call under m.mu.
func (m *Matcher) forgetUnownedPollers() {
	for qk, byIdentity := range m.pollers {
		if m.owns(qk.namespaceID, qk.name) {
			continue
		}
		for _, rec := range byIdentity {
			m.forgetPoller(rec)
		}
	}
}

// forgetPollersOfWorker removes the poller history of a worker that shut down, as Temporal
// does, so that a describe does not list a worker that has gone. Call under m.mu.
func (m *Matcher) forgetPollersOfWorker(wk workerKey) {
	for rec := range m.pollersByWorker[wk] {
		m.forgetPoller(rec)
	}
}

// expirePollers drops the poller history entries not refreshed within PollerHistoryTTL. Call
// under m.mu.
func (m *Matcher) expirePollers(now time.Time) {
	for e := m.pollerOrder.Front(); e != nil; e = m.pollerOrder.Front() {
		rec := e.Value.(*pollerRecord)
		if now.Sub(rec.lastAccess) < m.opts.PollerHistoryTTL {
			return
		}
		m.forgetPoller(rec)
	}
}

// DescribeActivityQueue returns the queue's pollers of the last PollerHistoryTTL and its
// backlog. A queue nobody has used is described empty, not refused: every name is a valid
// task queue. It returns ErrNotOwner for a queue this host does not own and ErrStopped after
// Stop.
func (m *Matcher) DescribeActivityQueue(_ context.Context, namespaceID, taskQueue string) (QueueDescription, error) {
	if namespaceID == "" || taskQueue == "" {
		return QueueDescription{}, fmt.Errorf("%w: describe needs a namespace and task queue", ErrInvalidArgument)
	}
	now := m.ts.Now()
	qk := queueKey{namespaceID, taskQueue}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return QueueDescription{}, ErrStopped
	}
	if !m.ownsLocked(namespaceID, taskQueue) {
		return QueueDescription{}, ErrNotOwner
	}
	var d QueueDescription
	for _, rec := range m.pollers[qk] {
		if now.Sub(rec.lastAccess) >= m.opts.PollerHistoryTTL {
			continue // expires at the next sweep
		}
		d.Pollers = append(d.Pollers, Poller{
			Identity: rec.identity, WorkerInstanceKey: rec.worker.instanceKey,
			LastAccessTime: rec.lastAccess, RatePerSecond: rec.rps,
		})
	}
	slices.SortFunc(d.Pollers, func(a, b Poller) int { return strings.Compare(a.Identity, b.Identity) })
	if q := m.activityQueues[qk]; q != nil {
		d.BacklogCount = int64(q.backlog.Len())
		if q.backlog.Len() > 0 {
			if st := q.backlog.entries[0].ref.ScheduledTime; !st.IsZero() && now.After(st) {
				d.BacklogAge = now.Sub(st)
			}
		}
		d.TasksAddRate = q.added.rate(now)
		d.TasksDispatchRate = q.dispatched.rate(now)
	}
	return d, nil
}

// Rates are counted in rateBuckets buckets of rateBucketSpan: a rate is the count of the
// current bucket and the rateBuckets-1 before it, over the time they cover (about
// rateWindowSpan, as Temporal's "averaged over the last 30 seconds").
const (
	rateBucketSpan = 5 * time.Second
	rateBuckets    = 6
	rateWindowSpan = rateBucketSpan * rateBuckets
)

// rateCounter counts events in time buckets. Its zero value is ready; since is set by the
// first event.
type rateCounter struct {
	since  time.Time
	counts [rateBuckets]int64
	ids    [rateBuckets]int64 // bucket number each slot holds
}

func bucketOf(t time.Time) int64 { return t.UnixNano() / int64(rateBucketSpan) }

func (r *rateCounter) inc(now time.Time) {
	if r.since.IsZero() {
		r.since = now
	}
	id := bucketOf(now)
	slot := int(id % rateBuckets)
	if r.ids[slot] != id {
		r.ids[slot], r.counts[slot] = id, 0
	}
	r.counts[slot]++
}

// rate is events per second over the buckets of the window that ends now.
func (r *rateCounter) rate(now time.Time) float64 {
	if r.since.IsZero() {
		return 0
	}
	cur := bucketOf(now)
	var n int64
	for i := range rateBuckets {
		if id := r.ids[i]; id > cur-rateBuckets && id <= cur {
			n += r.counts[i]
		}
	}
	start := time.Unix(0, (cur-rateBuckets+1)*int64(rateBucketSpan))
	if r.since.After(start) {
		start = r.since
	}
	elapsed := now.Sub(start)
	if elapsed < time.Second {
		// A young counter would otherwise report a burst of a few milliseconds as thousands
		// per second.
		elapsed = time.Second
	}
	return float64(n) / elapsed.Seconds()
}
