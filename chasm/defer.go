package chasm

import (
	"errors"
	"fmt"
	"time"
)

// DeferTask is what a pure task's executor returns to decline to run now and be offered again
// at until: the transaction is discarded (nothing is written), the task stays as it is, valid,
// and the host holds it in memory until then. It is for executors that must wait without
// writing anything while they wait: on something outside the execution (the expiry brake), or
// for a time that changes made in memory moved (DeferWrite), where re-arming the task would be
// a write. The task still makes its validator false once it does run.
func DeferTask(until time.Time) error {
	return &DeferredError{Until: until}
}

// DeferredError is DeferTask's error.
type DeferredError struct {
	Until time.Time
}

func (e *DeferredError) Error() string {
	return fmt.Sprintf("chasm: task deferred until %s", e.Until.Format(time.RFC3339Nano))
}

// AsDeferred returns the time a deferred task asks to be offered again, if err is a deferral.
func AsDeferred(err error) (time.Time, bool) {
	var d *DeferredError
	if errors.As(err, &d) {
		return d.Until, true
	}
	return time.Time{}, false
}
