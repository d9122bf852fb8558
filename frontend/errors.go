package frontend

import (
	"fmt"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// ConflictTokenMismatchError is returned when a heartbeat carried a stale conflict token. It
// is a serviceerror.ServiceError, so serviceerror.ToStatus keeps its detail: clients find a
// livenesspb.ConflictTokenMismatch among the status details.
type ConflictTokenMismatchError struct {
	Message              string
	CurrentConflictToken int64
}

// NewConflictTokenMismatch returns a ConflictTokenMismatchError.
func NewConflictTokenMismatch(message string, current int64) *ConflictTokenMismatchError {
	return &ConflictTokenMismatchError{Message: message, CurrentConflictToken: current}
}

func (e *ConflictTokenMismatchError) Error() string { return e.Message }

// Status implements serviceerror.ServiceError: FailedPrecondition with the current token.
func (e *ConflictTokenMismatchError) Status() *status.Status {
	st := status.New(codes.FailedPrecondition, e.Message)
	if withDetail, err := st.WithDetails(&livenesspb.ConflictTokenMismatch{CurrentConflictToken: e.CurrentConflictToken}); err == nil {
		return withDetail
	}
	return st
}

var _ serviceerror.ServiceError = (*ConflictTokenMismatchError)(nil)

// entryError turns history's per-heartbeat error into a serviceerror value with its code.
func entryError(e *workerpb.EntryError) error {
	code := codes.Code(e.GetCode())
	if code == codes.OK {
		return serviceerror.NewInternalf("history reported a heartbeat failure without a code: %s", e.GetMessage())
	}
	return serviceerror.FromStatus(status.New(code, e.GetMessage()))
}

// codeRank orders the codes a multi-heartbeat request can fail with; the request reports the
// failure of highest rank. Transient failures come first: the SDK retries a heartbeat request
// only on a retryable code, heartbeats are idempotent, and a heartbeat that is lost for a
// whole interval can cost a live worker its lease. Among permanent failures, the ones the
// caller can fix come first.
var codeRank = map[codes.Code]int{
	codes.ResourceExhausted:  10,
	codes.Unavailable:        9,
	codes.Aborted:            8,
	codes.DeadlineExceeded:   7,
	codes.Canceled:           6,
	codes.PermissionDenied:   5,
	codes.InvalidArgument:    4,
	codes.FailedPrecondition: 3,
	codes.NotFound:           2,
	codes.Internal:           1,
}

// heartbeatFailure is one failed heartbeat (or a whole failed shard call) of a request.
type heartbeatFailure struct {
	workerInstanceKey string
	err               error
}

// mostActionable picks the failure to report for a request of total heartbeats and says how
// many failed. The chosen error keeps its type (and details); only its message is extended.
func mostActionable(failures []heartbeatFailure, total int) error {
	if len(failures) == 0 {
		return nil
	}
	best := failures[0]
	bestRank := codeRank[serviceerror.ToStatus(best.err).Code()]
	for _, f := range failures[1:] {
		if rank := codeRank[serviceerror.ToStatus(f.err).Code()]; rank > bestRank {
			best, bestRank = f, rank
		}
	}
	if len(failures) == 1 && total == 1 {
		return best.err
	}
	st := serviceerror.ToStatus(best.err).Proto()
	st.Message = fmt.Sprintf("%d of %d heartbeats failed; worker %q: %s", len(failures), total, best.workerInstanceKey, st.Message)
	return serviceerror.FromStatus(status.FromProto(st))
}
