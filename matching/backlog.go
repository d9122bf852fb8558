package matching

import "container/heap"

// taskEntry is one queued activity task.
type taskEntry struct {
	ref   ActivityTaskRef
	queue *activityQueue
	// returned entries go before every other: the frontend could not deliver them, so they
	// were already at the head once.
	returned bool
	// seq breaks ties between equal ScheduledTimes in insertion order.
	seq   uint64
	index int // position in the heap, maintained by backlog
}

func (e *taskEntry) before(o *taskEntry) bool {
	if e.returned != o.returned {
		return e.returned
	}
	if c := e.ref.ScheduledTime.Compare(o.ref.ScheduledTime); c != 0 {
		return c < 0
	}
	return e.seq < o.seq
}

// backlog orders a queue's tasks: returned first, then by ScheduledTime, then insertion. A heap
// rather than a list because tasks also leave from the middle (superseded, removed) and retries
// arrive with ScheduledTimes earlier than tasks already queued.
type backlog struct{ entries []*taskEntry }

func (b *backlog) Len() int           { return len(b.entries) }
func (b *backlog) Less(i, j int) bool { return b.entries[i].before(b.entries[j]) }
func (b *backlog) Swap(i, j int) {
	b.entries[i], b.entries[j] = b.entries[j], b.entries[i]
	b.entries[i].index = i
	b.entries[j].index = j
}

// Push and Pop implement heap.Interface; use push, pop and remove instead.
func (b *backlog) Push(x any) {
	e := x.(*taskEntry)
	e.index = len(b.entries)
	b.entries = append(b.entries, e)
}

func (b *backlog) Pop() any {
	n := len(b.entries) - 1
	e := b.entries[n]
	b.entries[n] = nil
	b.entries = b.entries[:n]
	e.index = -1
	return e
}

func (b *backlog) push(e *taskEntry) { heap.Push(b, e) }

func (b *backlog) pop() *taskEntry {
	if len(b.entries) == 0 {
		return nil
	}
	e := heap.Pop(b).(*taskEntry)
	b.shrink()
	return e
}

func (b *backlog) remove(e *taskEntry) {
	heap.Remove(b, e.index)
	b.shrink()
}

// fix restores the order after e's sort key changed.
func (b *backlog) fix(e *taskEntry) { heap.Fix(b, e.index) }

// shrink gives memory back after a large backlog drained, so a burst does not pin its peak
// allocation for the life of the queue.
func (b *backlog) shrink() {
	if c := cap(b.entries); c > 1024 && len(b.entries) < c/4 {
		b.entries = append([]*taskEntry(nil), b.entries...)
	}
}
