package tasks

import "errors"

// Park wraps an executor error to say that retrying is pointless: the task cannot be
// processed by this binary (an unknown task type, a payload or execution that does not
// decode). The queue logs it, counts it in "tasks_parked", and drops it from memory without
// deleting it from the store: it stays there for a later release or an operator, and is read
// again only after a restart. That is neither a crash loop nor a silent loss.
func Park(err error) error {
	if err == nil {
		return nil
	}
	return &parkedError{err: err}
}

type parkedError struct{ err error }

func (e *parkedError) Error() string { return "task parked: " + e.err.Error() }
func (e *parkedError) Unwrap() error { return e.err }

func isParked(err error) bool {
	var p *parkedError
	return errors.As(err, &p)
}
