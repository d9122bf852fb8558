package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Times are stored as int64 unix nanoseconds (UTC). That covers 1677-09-21 to 2262-04-11.
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

// The list page token is opaque to callers: a version byte, then the last returned
// (business_id, run_id) as a uvarint-length-prefixed business ID followed by the run ID.
const pageTokenVersion = 1

func encodePageToken(businessID, runID string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(businessID)+len(runID))
	b = append(b, pageTokenVersion)
	b = binary.AppendUvarint(b, uint64(len(businessID)))
	b = append(b, businessID...)
	b = append(b, runID...)
	return b
}

var errInvalidPageToken = errors.New("invalid next page token")

func decodePageToken(tok []byte) (businessID, runID string, err error) {
	if len(tok) == 0 || tok[0] != pageTokenVersion {
		return "", "", errInvalidPageToken
	}
	n, k := binary.Uvarint(tok[1:])
	if k <= 0 || n > uint64(len(tok)-1-k) {
		return "", "", errInvalidPageToken
	}
	rest := tok[1+k:]
	return string(rest[:n]), string(rest[n:]), nil
}

func sqliteCode(err error) (int, bool) {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff, true
	}
	return 0, false
}

// isConstraint reports a constraint violation, which fails the statement (and so the write that
// issued it) but leaves the transaction usable.
func isConstraint(err error) bool {
	code, ok := sqliteCode(err)
	return ok && code == sqlite3.SQLITE_CONSTRAINT
}

func isNotADatabase(err error) bool {
	code, ok := sqliteCode(err)
	return ok && (code == sqlite3.SQLITE_NOTADB || code == sqlite3.SQLITE_CORRUPT)
}
