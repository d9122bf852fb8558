package matching

import (
	"context"
	"time"
)

// delivery is what a waiting poll receives: a value, or ok=false when the poll is completed
// empty (ShutdownWorker, Stop).
type delivery[T any] struct {
	value T
	ok    bool
}

// waiter is one poll blocked on a queue.
//
// The hand-off invariant: a waiter is unlinked from its list exactly once, under the matcher's
// lock, and whoever unlinks it is the only writer of its channel. Either the poll unlinks
// itself (it gave up: nothing was or will be sent) or someone else unlinks it and sends exactly
// one delivery before releasing the lock. A poll that finds itself already unlinked therefore
// always finds its delivery waiting in the buffered channel, so a task can never be sent to a
// poll that has gone away.
type waiter[T any] struct {
	ctx        context.Context
	ch         chan delivery[T] // capacity 1
	prev, next *waiter[T]
	list       *waitList[T] // nil once unlinked

	// queueKey names the queue whose list holds the waiter.
	queueKey queueKey
	// workerKey is the activity poll's worker key (zero for command polls and keyless polls).
	workerKey workerKey
}

func newWaiter[T any](ctx context.Context, qk queueKey) *waiter[T] {
	return &waiter[T]{ctx: ctx, ch: make(chan delivery[T], 1), queueKey: qk}
}

func (w *waiter[T]) linked() bool { return w.list != nil }

// waitList is a FIFO of waiters, intrusive so that a poll removes itself in O(1).
type waitList[T any] struct {
	head, tail *waiter[T]
	n          int
}

func (l *waitList[T]) len() int { return l.n }

func (l *waitList[T]) pushBack(w *waiter[T]) {
	w.list = l
	w.prev = l.tail
	w.next = nil
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
	l.n++
}

func (l *waitList[T]) remove(w *waiter[T]) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next, w.list = nil, nil, nil
	l.n--
}

// popLive unlinks and returns the longest-waiting waiter whose context is still live. Waiters
// whose context already ended are unlinked too and completed empty: they are about to give up,
// and handing them a task would only make them put it back. onUnlink (may be nil) is called
// for every waiter unlinked.
func (l *waitList[T]) popLive(onUnlink func(*waiter[T])) *waiter[T] {
	for w := l.head; w != nil; w = l.head {
		l.remove(w)
		if onUnlink != nil {
			onUnlink(w)
		}
		if w.ctx.Err() == nil {
			return w
		}
		w.ch <- delivery[T]{}
	}
	return nil
}

// waitOutcome says why a wait ended.
type waitOutcome int

const (
	// outcomeDelivered: another party unlinked the waiter and sent a delivery.
	outcomeDelivered waitOutcome = iota
	// outcomeTimedOut: the poll's wait ran out and the poll unlinked itself.
	outcomeTimedOut
	// outcomeCancelled: the poll's context ended and the poll unlinked itself.
	outcomeCancelled
)

// await blocks until w receives a delivery, the wait elapses or ctx ends. unlink, called under
// m.mu only while w is still linked, removes w from every structure that references it.
func await[T any](m *Matcher, ctx context.Context, w *waiter[T], timerC <-chan time.Time, unlink func()) (delivery[T], waitOutcome) {
	var outcome waitOutcome
	select {
	case d := <-w.ch:
		return d, outcomeDelivered
	case <-timerC:
		outcome = outcomeTimedOut
	case <-ctx.Done():
		outcome = outcomeCancelled
	}
	m.mu.Lock()
	if w.linked() {
		unlink()
		m.mu.Unlock()
		return delivery[T]{}, outcome
	}
	m.mu.Unlock()
	// Someone unlinked w before we could: by the invariant above the delivery is already in
	// the channel, and it must be taken rather than dropped.
	return <-w.ch, outcomeDelivered
}
