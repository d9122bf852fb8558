package activity

import (
	"fmt"

	"go.temporal.io/api/serviceerror"
)

// errStaleAttempt refuses a worker call that names an attempt the activity has moved past: a
// dead worker's late completion, a heartbeat after a timeout, a second poll of one dispatch.
// NotFound is what the SDK expects for a stale token (it cancels the activity's context on a
// heartbeat, and only logs on a completion).
func errStaleAttempt(activityID string, stamp int64, a *Activity) error {
	return serviceerror.NewNotFound(fmt.Sprintf(
		"activity %s: attempt with stamp %d is no longer current (status %s, current stamp %d)",
		activityID, stamp, StatusName(a.Status), a.Stamp))
}

func errInvalidToken(msg string) error {
	return serviceerror.NewInvalidArgument(msg)
}

func invalidArgument(format string, args ...any) error {
	return serviceerror.NewInvalidArgument(fmt.Sprintf(format, args...))
}

func failedPrecondition(format string, args ...any) error {
	return serviceerror.NewFailedPrecondition(fmt.Sprintf(format, args...))
}
