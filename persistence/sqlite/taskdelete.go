package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Deletes of executed tasks ride in the group commit's transactions. Every shard has a timer
// and an outbound queue, each deleting what it executed on its own. In transactions of their
// own, they competed with the group commit for the only write connection and paid a commit
// each (its WAL frames and its fsync): during a fleet restart, whose shutdowns fan out a
// reschedule task per destination shard, their commits were a third of the writer's time. A
// delete now waits up to taskDeleteLinger for the next WriteBatch, which runs it after its
// writes, in the same transaction, on pages that batch writes anyway; only when no batch
// comes (an idle store) does a transaction of deletes alone commit.
const (
	// taskDeleteLinger is the longest a delete waits for a WriteBatch to carry it.
	taskDeleteLinger = 50 * time.Millisecond
	// taskDeletesPerBatch caps the rows a WriteBatch deletes (at least one call's), so that
	// a backlog of deletes does not hold up the heartbeats in that batch; the rest wait for
	// the next batch or the linger.
	taskDeletesPerBatch = 256
)

// taskDeleteFn is one queue's delete of executed tasks, run inside a shared transaction.
type taskDeleteFn func(ctx context.Context, tx *sql.Tx) error

// taskDelete is one call's delete, waiting for a transaction.
type taskDelete struct {
	fn   taskDeleteFn
	rows int
	done chan error // buffered: answered once, whether or not the caller still waits
}

// taskDeletes queues the deletes of executed tasks until a transaction takes them.
type taskDeletes struct {
	mu      sync.Mutex
	pending []*taskDelete
	// flushing is set while a flusher goroutine lingers or commits; it takes whatever no
	// batch took, until nothing is pending.
	flushing bool
	flush    func(ds []*taskDelete) error
	// linger is taskDeleteLinger; tests lengthen it.
	linger time.Duration
	// calls and rounds count the deletes queued and the transactions of deletes alone so
	// far, for tests.
	calls, rounds int
}

// do queues fn (which deletes rows rows) and waits until a transaction committed it.
func (q *taskDeletes) do(ctx context.Context, rows int, fn taskDeleteFn) error {
	d := &taskDelete{fn: fn, rows: rows, done: make(chan error, 1)}
	q.mu.Lock()
	q.pending = append(q.pending, d)
	q.calls++
	if !q.flushing {
		q.flushing = true
		go q.flushLoop()
	}
	q.mu.Unlock()
	select {
	case err := <-d.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flushLoop gives each round of deletes taskDeleteLinger to ride in a WriteBatch, then commits
// what is left in a transaction of its own.
func (q *taskDeletes) flushLoop() {
	for {
		time.Sleep(q.linger)
		q.mu.Lock()
		ds := q.pending
		q.pending = nil
		if len(ds) == 0 {
			q.flushing = false
			q.mu.Unlock()
			return
		}
		q.rounds++
		q.mu.Unlock()
		answer(ds, q.flush(ds))
	}
}

// take removes the deletes a WriteBatch carries: the oldest, up to taskDeletesPerBatch rows.
func (q *taskDeletes) take() []*taskDelete {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return nil // most batches: nothing to carry
	}
	n, rows := 0, 0
	for n < len(q.pending) && (n == 0 || rows+q.pending[n].rows <= taskDeletesPerBatch) {
		rows += q.pending[n].rows
		n++
	}
	ds := slices.Clone(q.pending[:n])
	// Shift rather than reslice, so the backing array does not keep the taken deletes.
	rest := copy(q.pending, q.pending[n:])
	clear(q.pending[rest:])
	q.pending = q.pending[:rest]
	return ds
}

// giveBack returns deletes whose transaction did not commit to the front of the queue, and
// starts a flusher if none is lingering: one stops only when it finds nothing pending, under
// the same lock.
func (q *taskDeletes) giveBack(ds []*taskDelete) {
	if len(ds) == 0 {
		return
	}
	q.mu.Lock()
	q.pending = append(ds[:len(ds):len(ds)], q.pending...)
	if !q.flushing {
		q.flushing = true
		go q.flushLoop()
	}
	q.mu.Unlock()
}

// counts reports the deletes queued and waiting, and the transactions of deletes alone so
// far, for tests.
func (q *taskDeletes) counts() (calls, pending, rounds int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.calls, len(q.pending), q.rounds
}

func answer(ds []*taskDelete, err error) {
	for _, d := range ds {
		d.done <- err
	}
}

// runTaskDeletes runs ds in tx.
func runTaskDeletes(ctx context.Context, tx *sql.Tx, ds []*taskDelete) error {
	for _, d := range ds {
		if err := d.fn(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}

// flushTaskDeletes commits ds in a transaction of their own. A failed transaction fails every
// delete in it; deletes are idempotent, and callers retry.
func (s *Store) flushTaskDeletes(ds []*taskDelete) error {
	return s.inWriteTx(context.Background(), func(tx *sql.Tx) error {
		return runTaskDeletes(context.Background(), tx, ds)
	})
}

// carryTaskDeletes runs the queued deletes in a WriteBatch's transaction, after its writes,
// each in a savepoint: a delete that fails is undone alone and given back for a later
// transaction, and never fails the batch's writes. It returns the deletes that ran, to answer
// once the transaction commits (or give back if it does not).
func (s *Store) carryTaskDeletes(ctx context.Context, tx *sql.Tx) []*taskDelete {
	ds := s.taskDeletes.take()
	if len(ds) == 0 {
		return nil
	}
	savepoint := tx.StmtContext(ctx, s.writeStmts[qSavepointTaskDeletes])
	rollback := tx.StmtContext(ctx, s.writeStmts[qRollbackToSavepointTaskDeletes])
	release := tx.StmtContext(ctx, s.writeStmts[qReleaseSavepointTaskDeletes])
	ran, failed := ds[:0:0], ds[:0:0]
	for _, d := range ds {
		if _, err := savepoint.ExecContext(ctx); err != nil {
			failed = append(failed, d)
			continue
		}
		err := d.fn(ctx, tx)
		if err != nil {
			_, _ = rollback.ExecContext(ctx)
		}
		_, relErr := release.ExecContext(ctx)
		if err = errors.Join(err, relErr); err == nil {
			ran = append(ran, d)
			continue
		}
		failed = append(failed, d)
		s.logger.Warn("deleting executed tasks in a write batch failed; retrying them later", zap.Error(err))
	}
	s.taskDeletes.giveBack(failed)
	return ran
}
