package sqlite

import (
	"context"
	"database/sql"
)

// taskDeleteFn is one queue's delete of executed tasks, run inside a shared transaction.
type taskDeleteFn func(ctx context.Context, tx *sql.Tx) error

// flushTaskDeletes runs the task deletes that queued together in one write transaction. Every
// shard has a timer and an outbound queue, each deleting what it executed on its own; one
// transaction (and one fsync) per call made them compete with the group commit for the only
// write connection, and under a burst of reschedules they took a quarter of the server's CPU.
// A failed transaction fails every delete in it; deletes are idempotent, and callers retry.
func (s *Store) flushTaskDeletes(ctx context.Context, _ struct{}, deletes []taskDeleteFn) error {
	s.taskDeleteRounds.Add(1)
	return s.inWriteTx(ctx, func(tx *sql.Tx) error {
		for _, del := range deletes {
			if err := del(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	})
}
