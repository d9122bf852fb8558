package postgres

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Times are stored as int64 unix nanoseconds (UTC), as in the SQLite backend. That covers
// 1677-09-21 to 2262-04-11; timestamptz would lose the nanoseconds.
var (
	minStorableTime = time.Unix(0, math.MinInt64)
	maxStorableTime = time.Unix(0, math.MaxInt64)
)

// timeToNanos converts a time to be stored, refusing one the column cannot represent rather
// than storing a wrapped-around value.
func timeToNanos(t time.Time) (int64, error) {
	if t.Before(minStorableTime) || t.After(maxStorableTime) {
		return 0, fmt.Errorf("time %s is outside the storable range [%s, %s]",
			t.Format(time.RFC3339Nano), minStorableTime.UTC().Format(time.RFC3339), maxStorableTime.UTC().Format(time.RFC3339))
	}
	return t.UnixNano(), nil
}

// boundToNanos converts a query bound, clamping instead of failing: a bound before (after) the
// storable range selects the same rows as the range's first (last) instant.
func boundToNanos(t time.Time) int64 {
	switch {
	case t.Before(minStorableTime):
		return math.MinInt64
	case t.After(maxStorableTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func nanosToTime(n int64) time.Time {
	return time.Unix(0, n).UTC()
}

// The list page token is opaque to callers: a format byte, then the last returned
// (business_id, run_id) as a uvarint-length-prefixed business ID followed by the run ID. The
// format byte differs from the SQLite backend's, so a token cannot wander between backends
// unnoticed.
const pageTokenFormat = 'p'

func encodePageToken(businessID, runID string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(businessID)+len(runID))
	b = append(b, pageTokenFormat)
	b = binary.AppendUvarint(b, uint64(len(businessID)))
	b = append(b, businessID...)
	b = append(b, runID...)
	return b
}

var errInvalidPageToken = errors.New("invalid next page token")

func decodePageToken(tok []byte) (businessID, runID string, err error) {
	if len(tok) == 0 || tok[0] != pageTokenFormat {
		return "", "", errInvalidPageToken
	}
	n, k := binary.Uvarint(tok[1:])
	if k <= 0 || n > uint64(len(tok)-1-k) {
		return "", "", errInvalidPageToken
	}
	rest := tok[1+k:]
	return string(rest[:n]), string(rest[n:]), nil
}

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
