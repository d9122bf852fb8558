package matching

import "errors"

var (
	// ErrStopped is returned by calls made after Stop. The frontend maps it to Unavailable so
	// that SDK pollers back off and retry (another host, or this one after restart).
	ErrStopped = errors.New("matching: stopped")
	// ErrBacklogFull is returned when a task queue already holds Options.BacklogCap tasks (or a
	// control queue Options.CommandQueueCap commands). Nothing queued is dropped to make room.
	// A refused activity task is not lost: it is still SCHEDULED in history, and history's
	// recovery scan dispatches every SCHEDULED activity again (after a restart, or when the
	// caller retries).
	ErrBacklogFull = errors.New("matching: queue is full")
	// ErrInvalidArgument is returned for a task, poll or command missing an identifying field.
	ErrInvalidArgument = errors.New("matching: invalid argument")
	// ErrNotOwner is returned for a queue that, by the ownership set with SetOwnership, another
	// host owns. Nothing was queued or polled; the caller asks the owner (see Client).
	ErrNotOwner = errors.New("matching: another host owns the queue")
)
