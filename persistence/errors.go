package persistence

import (
	"errors"
	"fmt"
)

// ErrInvalidListRequest marks a listing's failure that is the caller's: a page token the
// store did not hand out, or a visibility query it cannot compile.
var ErrInvalidListRequest = errors.New("invalid list request")

// NotFoundError reports a missing row.
type NotFoundError struct {
	Msg string
}

func (e *NotFoundError) Error() string { return e.Msg }

// ShardOwnershipLostError reports a write fenced off because another host acquired the shard.
type ShardOwnershipLostError struct {
	ShardID       int32
	RangeID       int64
	StoredRangeID int64
}

func (e *ShardOwnershipLostError) Error() string {
	return fmt.Sprintf("shard %d ownership lost: write carried range_id %d, stored range_id is %d",
		e.ShardID, e.RangeID, e.StoredRangeID)
}

// ConditionFailedError reports an optimistic-concurrency conflict: the execution changed since
// it was read.
type ConditionFailedError struct {
	Key             ExecutionKey
	ExpectedVersion int64
	ActualVersion   int64
}

func (e *ConditionFailedError) Error() string {
	return fmt.Sprintf("execution %s/%d/%s/%s changed: expected db version %d, found %d",
		e.Key.NamespaceID, e.Key.ArchetypeID, e.Key.BusinessID, e.Key.RunID, e.ExpectedVersion, e.ActualVersion)
}

// ExecutionAlreadyExistsError reports a create of a run that exists.
type ExecutionAlreadyExistsError struct {
	Key ExecutionKey
}

func (e *ExecutionAlreadyExistsError) Error() string {
	return fmt.Sprintf("execution %s/%d/%s/%s already exists",
		e.Key.NamespaceID, e.Key.ArchetypeID, e.Key.BusinessID, e.Key.RunID)
}

// CurrentExecutionConflictError reports a create whose expectation about the current run of
// the business ID did not hold.
type CurrentExecutionConflictError struct {
	Key          CurrentExecutionKey
	CurrentRunID string
	Lifecycle    Lifecycle
}

func (e *CurrentExecutionConflictError) Error() string {
	return fmt.Sprintf("business id %s/%d/%s is held by run %q",
		e.Key.NamespaceID, e.Key.ArchetypeID, e.Key.BusinessID, e.CurrentRunID)
}
