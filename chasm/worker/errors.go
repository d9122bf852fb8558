package worker

import (
	"fmt"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// ConflictTokenMismatchError refuses a heartbeat whose conflict token is stale. It carries the
// current token, in the message and as a status detail, so the client resyncs without another
// call. It is a serviceerror.ServiceError: serviceerror.ToStatus keeps the detail.
type ConflictTokenMismatchError struct {
	WorkerInstanceKey string
	Sent, Current     int64
}

var _ serviceerror.ServiceError = (*ConflictTokenMismatchError)(nil)

func (e *ConflictTokenMismatchError) Error() string {
	return fmt.Sprintf("worker %s: conflict token %d is stale, current token is %d", e.WorkerInstanceKey, e.Sent, e.Current)
}

// Status implements serviceerror.ServiceError.
func (e *ConflictTokenMismatchError) Status() *status.Status {
	st := status.New(codes.FailedPrecondition, e.Error())
	if withDetail, err := st.WithDetails(&workerpb.ConflictTokenMismatch{CurrentConflictToken: e.Current}); err == nil {
		return withDetail
	}
	return st
}

func newCleanedUpError(workerInstanceKey string) error {
	return serviceerror.NewFailedPrecondition(fmt.Sprintf(
		"worker %s was cleaned up after being inactive; restart it with a new WorkerInstanceKey", workerInstanceKey))
}
