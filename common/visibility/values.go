package visibility

import (
	"math"
	"time"
)

// Unknown is how a store keeps an unknown time or duration (a running execution's close time):
// the largest value, so that every index orders it last ascending and first descending, as
// NULL sorts in PostgreSQL, with no NULL to compare. Predicates exclude it.
const Unknown = math.MaxInt64

var (
	minNanosTime = time.Unix(0, math.MinInt64)
	maxNanosTime = time.Unix(0, math.MaxInt64-1)
)

// TimeNanos is a record's time as the system columns hold it: unix nanoseconds, Unknown for
// the zero time.
func TimeNanos(t time.Time) int64 {
	if t.IsZero() {
		return Unknown
	}
	return BoundNanos(t)
}

// BoundNanos is a time compared with the system columns: unix nanoseconds, clamped to the
// range (below Unknown) a stored time can take, which selects the same stored times.
func BoundNanos(t time.Time) int64 {
	switch {
	case t.Before(minNanosTime):
		return math.MinInt64
	case t.After(maxNanosTime):
		return math.MaxInt64 - 1
	}
	return t.UnixNano()
}

// DurationNanos is a record's duration as the ExecutionDuration column holds it.
func (r *Record) DurationNanos() int64 {
	if d, ok := r.Duration(); ok {
		return int64(d)
	}
	return Unknown
}
