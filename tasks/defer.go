package tasks

import (
	"errors"
	"time"
)

// Defer wraps an executor's answer that a timer task declined to run now and asks to be
// offered again at until. The timer queue keeps it in memory and fires it again then: not a
// failure (no retry count, no error metric, no log), and nothing is deleted or written. Tasks
// deferred to the same instant fire in their (VisibilityTime, TaskID) order, oldest first.
func Defer(until time.Time) error {
	return &deferredError{until: until}
}

type deferredError struct{ until time.Time }

func (e *deferredError) Error() string { return "task deferred until " + e.until.String() }

func asDeferred(err error) (time.Time, bool) {
	var d *deferredError
	if errors.As(err, &d) {
		return d.until, true
	}
	return time.Time{}, false
}
