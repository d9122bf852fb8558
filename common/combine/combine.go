// Package combine runs work that arrives while a flush is in progress together, in the next
// flush: the write-combining of a group commit, for callers that share a key (a worker's
// acknowledgements, a store's task deletes) and whose flush is one transaction.
//
// There is no standing goroutine. The first caller to find nothing running for its key
// flushes round after round until its own item is done, then hands whatever is still queued
// to a goroutine that runs until nothing is left. A failed flush fails every item in it.
package combine

import (
	"context"
	"sync"
)

// Combiner combines the items of each key. The zero value is not usable: call New.
type Combiner[K comparable, T any] struct {
	flush func(ctx context.Context, key K, items []T) error

	mu     sync.Mutex
	groups map[K]*group[T]
}

type group[T any] struct {
	queued  []*call[T]
	running bool
}

type call[T any] struct {
	item T
	done chan error // buffered: a flush never blocks on a caller that stopped waiting
}

// New returns a Combiner whose rounds call flush with the items queued for one key, in the
// order they arrived.
func New[K comparable, T any](flush func(ctx context.Context, key K, items []T) error) *Combiner[K, T] {
	return &Combiner[K, T]{flush: flush, groups: make(map[K]*group[T])}
}

// Do queues item under key and returns the error of the flush that carried it, or ctx's error
// if ctx ends first (the item may still be flushed). Flushes run under a ctx without ctx's
// cancellation: the other items of a round are not this caller's to cancel.
func (c *Combiner[K, T]) Do(ctx context.Context, key K, item T) error {
	mine := &call[T]{item: item, done: make(chan error, 1)}
	c.mu.Lock()
	g := c.groups[key]
	if g == nil {
		g = &group[T]{}
		c.groups[key] = g
	}
	g.queued = append(g.queued, mine)
	lead := !g.running
	g.running = true
	c.mu.Unlock()
	if lead {
		c.run(context.WithoutCancel(ctx), key, g, mine)
	}
	select {
	case err := <-mine.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pending returns how many items of key wait for a flush that has not started.
func (c *Combiner[K, T]) Pending(key K) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[key]; g != nil {
		return len(g.queued)
	}
	return 0
}

// run flushes key's queued items, round after round, until mine (nil: every item) is done,
// and leaves what is still queued to a goroutine.
func (c *Combiner[K, T]) run(ctx context.Context, key K, g *group[T], mine *call[T]) {
	for {
		c.mu.Lock()
		round := g.queued
		g.queued = nil
		if len(round) == 0 {
			c.idle(key, g)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()

		items := make([]T, len(round))
		for i, call := range round {
			items[i] = call.item
		}
		err := c.flush(ctx, key, items)
		answered := false
		for _, call := range round {
			call.done <- err
			answered = answered || call == mine
		}
		if !answered {
			continue
		}
		c.mu.Lock()
		if len(g.queued) == 0 {
			c.idle(key, g)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		go c.run(ctx, key, g, nil)
		return
	}
}

// idle marks key's group as not running and forgets it. Call with c.mu held.
func (c *Combiner[K, T]) idle(key K, g *group[T]) {
	g.running = false
	delete(c.groups, key)
}
