package tasks

import (
	"fmt"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
)

// retryBackoff returns how long to wait after the attempt-th consecutive failure (attempt >= 1):
// initial × 2^(attempt-1), capped at maxInterval, then jittered down by up to half so that tasks
// that failed together (a destination that went away) do not all retry in the same instant.
func retryBackoff(attempt int, initial, maxInterval time.Duration) time.Duration {
	d := initial
	for i := 1; i < attempt && d < maxInterval; i++ {
		d *= 2
	}
	d = min(d, maxInterval)
	if half := d / 2; half > 0 {
		d = half + rand.N(half+1)
	}
	return d
}

// retryPolicy is how a queue retries: the backoff after consecutive failures (of a task, or of
// reads of the store) and the failure count at which a task counts as stuck. Every setting is
// read at each use, so dynamic config applies without a restart.
type retryPolicy struct {
	initialInterval func() time.Duration
	maxInterval     func() time.Duration
	alertAttempts   func() int
}

// backoff is how long to wait after the attempt-th consecutive failure (attempt >= 1).
func (p retryPolicy) backoff(attempt int) time.Duration {
	return retryBackoff(attempt, p.initialInterval(), p.maxInterval())
}

// validate panics on a maximum interval below the initial one: the one-time check of the
// queue options.
func (p retryPolicy) validate() {
	if p.maxInterval() < p.initialInterval() {
		panic(fmt.Sprintf("tasks: RetryMaxInterval %v is below RetryInitialInterval %v",
			p.maxInterval(), p.initialInterval()))
	}
}

// retryState is an in-memory task's record of its failed attempts.
type retryState struct {
	// attempts counts failures so far; executed means the executor succeeded and only the
	// delete is left to retry.
	attempts int
	executed bool
	// alerted is set once the task has failed AlertAttempts times: from then on it is one of
	// the queue's stuck tasks, until it completes or leaves memory.
	alerted bool
}

// failed records a failed attempt. It returns the backoff before the next attempt, and
// becameStuck when this failure reached AlertAttempts: the queue then counts the task as stuck,
// once.
func (r *retryState) failed(p retryPolicy) (backoff time.Duration, becameStuck bool) {
	r.attempts++
	if !r.alerted && r.attempts >= p.alertAttempts() {
		r.alerted = true
		becameStuck = true
	}
	return p.backoff(r.attempts), becameStuck
}

// logRetry logs a failed attempt of a task of the given kind ("timer", "outbound") that will be
// retried: as an error when the task has just become stuck, which happens once per task, and
// at debug level otherwise, so that a destination that is briefly down does not flood the log.
func logRetry(logger *zap.Logger, kind string, fields []zap.Field, attempts int, becameStuck bool, err error) {
	fields = append(fields, zap.Int("attempts", attempts), zap.Error(err))
	if becameStuck {
		logger.Error(kind+" task keeps failing; still retrying", fields...)
	} else {
		logger.Debug(kind+" task failed; will retry", fields...)
	}
}

// logParked logs a task whose executor parked it (see Park).
func logParked(logger *zap.Logger, fields []zap.Field, err error) {
	logger.Error("task parked: left in the store, not retried until restart", append(fields, zap.Error(err))...)
}
