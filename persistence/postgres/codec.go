package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// The list page token's format byte (see sqlcommon.EncodePageToken). It differs from the
// SQLite backend's, so a token cannot wander between backends unnoticed.
const pageTokenFormat = 'p'

// SQLSTATE codes the write path tells apart.
const (
	sqlstateUniqueViolation      = "23505"
	sqlstateSerializationFailure = "40001"
	sqlstateDeadlockDetected     = "40P01"
)

// executionsPrimaryKey is the constraint a create hits when a concurrent batch created the
// same run first.
const executionsPrimaryKey = "executions_pkey"

// statementError returns the server's error if err is one that fails the statement that raised
// it, and so the write that issued it, but leaves the transaction usable after ROLLBACK TO
// SAVEPOINT: bad data (class 22: an ID with a NUL byte), a violated constraint (class 23), or
// a conflict with a concurrent transaction (class 40). Anything else (a lost connection, a
// cancelled context, a timeout) fails the whole batch.
func statementError(err error) (*pgconn.PgError, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return nil, false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "40":
		return pgErr, true
	}
	return nil, false
}

// isConcurrencyConflict reports a deadlock or serialization failure: the write lost a race
// with another transaction and may succeed if re-read and retried.
func isConcurrencyConflict(pgErr *pgconn.PgError) bool {
	return pgErr.Code == sqlstateSerializationFailure || pgErr.Code == sqlstateDeadlockDetected
}
