package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// taskDeleteCombiner runs the deletes of executed tasks that arrive while one of its
// transactions commits together, in the next transaction. Every shard has a timer and an
// outbound queue, each deleting what it executed on its own; one transaction (and one fsync)
// per call made them compete with the group commit for the only write connection, and under
// a burst of reschedules they took a quarter of the server's CPU.
//
// There is no standing goroutine: the first caller to find nothing running runs rounds until
// its own call has committed, and hands what is still queued to a goroutine that runs until
// nothing is left. A failed round fails every call in it; deletes are idempotent, and callers
// retry.
type taskDeleteCombiner struct {
	store *Store

	mu      sync.Mutex
	queued  []*taskDeleteCall
	running bool
	// rounds counts the transactions run, for tests.
	rounds atomic.Int64
}

type taskDeleteCall struct {
	run  func(ctx context.Context, tx *sql.Tx) error
	done chan error // buffered: the runner never blocks on a caller that stopped waiting
}

// do runs fn in a write transaction shared with the calls queued beside it. It returns once
// that transaction has committed, or when ctx ends (the delete may still happen).
func (c *taskDeleteCombiner) do(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	call := &taskDeleteCall{run: fn, done: make(chan error, 1)}
	c.mu.Lock()
	c.queued = append(c.queued, call)
	lead := !c.running
	c.running = true
	c.mu.Unlock()
	if lead {
		c.runRounds(context.WithoutCancel(ctx), call)
	}
	select {
	case err := <-call.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runRounds commits the queued calls, round after round, until mine (nil: every call) has
// been answered, and leaves the rest to a goroutine. It does not stop for the leading caller's
// ctx: the other calls in a round are not its to cancel.
func (c *taskDeleteCombiner) runRounds(ctx context.Context, mine *taskDeleteCall) {
	for {
		c.mu.Lock()
		round := c.queued
		c.queued = nil
		if len(round) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.rounds.Add(1)
		err := c.store.inWriteTx(ctx, func(tx *sql.Tx) error {
			for _, call := range round {
				if err := call.run(ctx, tx); err != nil {
					return err
				}
			}
			return nil
		})
		answered := false
		for _, call := range round {
			call.done <- err
			answered = answered || call == mine
		}
		if answered {
			c.mu.Lock()
			if len(c.queued) == 0 {
				c.running = false
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
			go c.runRounds(ctx, nil)
			return
		}
	}
}
