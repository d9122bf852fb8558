// Package sqlcommon holds what the SQL backends (sqlite, postgres) share and is independent of
// the dialect: how times and list page tokens are encoded, which writes are well-formed, how
// result rows become records, and how the embedded schema files are read. SQL text stays in
// each backend.
package sqlcommon

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/vigilhq/vigil/persistence"
)

// Times are stored as int64 unix nanoseconds (UTC). That covers 1677-09-21 to 2262-04-11; a
// database timestamp type would lose the nanoseconds or differ between backends.
var (
	minStorableTime = time.Unix(0, math.MinInt64)
	maxStorableTime = time.Unix(0, math.MaxInt64)
)

// TimeToNanos converts a time to be stored, refusing one the column cannot represent rather
// than storing a wrapped-around value.
func TimeToNanos(t time.Time) (int64, error) {
	if t.Before(minStorableTime) || t.After(maxStorableTime) {
		return 0, fmt.Errorf("time %s is outside the storable range [%s, %s]",
			t.Format(time.RFC3339Nano), minStorableTime.UTC().Format(time.RFC3339), maxStorableTime.UTC().Format(time.RFC3339))
	}
	return t.UnixNano(), nil
}

// BoundToNanos converts a query bound, clamping instead of failing: a bound before (after) the
// storable range selects the same rows as the range's first (last) instant.
func BoundToNanos(t time.Time) int64 {
	switch {
	case t.Before(minStorableTime):
		return math.MinInt64
	case t.After(maxStorableTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// NanosToTime converts a stored time back.
func NanosToTime(n int64) time.Time {
	return time.Unix(0, n).UTC()
}

// A list page token is opaque to callers: a format byte, then the last returned
// (business_id, run_id) as a uvarint-length-prefixed business ID followed by the run ID. Each
// backend has its own format byte, so a token cannot wander between backends unnoticed.

// ErrInvalidPageToken is returned for a page token this backend did not hand out.
var ErrInvalidPageToken = fmt.Errorf("%w: invalid next page token", persistence.ErrInvalidListRequest)

// EncodePageToken returns the token of the page after the one ending at (businessID, runID).
func EncodePageToken(format byte, businessID, runID string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(businessID)+len(runID))
	b = append(b, format)
	b = binary.AppendUvarint(b, uint64(len(businessID)))
	b = append(b, businessID...)
	b = append(b, runID...)
	return b
}

// DecodePageToken returns the (businessID, runID) a token of the given format resumes after.
func DecodePageToken(format byte, tok []byte) (businessID, runID string, err error) {
	if len(tok) == 0 || tok[0] != format {
		return "", "", ErrInvalidPageToken
	}
	n, k := binary.Uvarint(tok[1:])
	if k <= 0 || n > uint64(len(tok)-1-k) {
		return "", "", ErrInvalidPageToken
	}
	rest := tok[1+k:]
	return string(rest[:n]), string(rest[n:]), nil
}

// KeyString formats an execution key for messages.
func KeyString(k persistence.ExecutionKey) string {
	return fmt.Sprintf("%s/%d/%s/%s", k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID)
}

// NonNil stores a nil byte slice as an empty blob: the columns are NOT NULL.
func NonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
