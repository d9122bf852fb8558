package frontend

import (
	"context"

	failurepb "go.temporal.io/api/failure/v1"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend/namespace"
)

// Payload limits, as Temporal's limit.blobSize.warn and limit.blobSize.error: a payload is the
// user data of one field (an activity's input, its result, a failure, heartbeat details). The
// gRPC message cap bounds a request; these bound what the server stores and keeps in memory.
//
// What happens above the error limit follows Temporal:
//   - a start is refused with InvalidArgument;
//   - an oversize result, cancel details or heartbeat details fail the activity with a
//     non-retryable ServerFailure saying why, and the worker's call answers InvalidArgument;
//   - an oversize failure is replaced by a non-retryable ServerFailure saying so; oversize
//     last heartbeat details are dropped.
const (
	failureResultExceedsLimit        = "Complete result exceeds size limit."
	failureFailureExceedsLimit       = "Failure exceeds size limit."
	failureCancelDetailsExceedsLimit = "Cancel details exceed size limit."
	failureHeartbeatDetailsExceed    = "Heartbeat details exceed size limit."
)

type blobLimits struct {
	warn, error func(namespace string) int
	logger      *zap.Logger
}

func newBlobLimits(deps Deps) blobLimits {
	return blobLimits{
		warn:   dynamicconfig.BlobSizeLimitWarn.Get(deps.DynamicConfig),
		error:  dynamicconfig.BlobSizeLimitError.Get(deps.DynamicConfig),
		logger: deps.Logger,
	}
}

// check returns an InvalidArgument error naming field if m is over the namespace's error
// limit, and logs a warning if it is over the warning limit.
func (b blobLimits) check(ns *namespace.Namespace, field string, m proto.Message) error {
	if m == nil {
		return nil
	}
	size := proto.Size(m)
	if limit := b.error(ns.Name); size > limit {
		return invalid("%s is %d bytes, more than the limit of %d (limit.blobSize.error)", field, size, limit)
	}
	if limit := b.warn(ns.Name); size > limit {
		b.logger.Warn("payload above the warning size", tag.Namespace(ns.Name), zap.String("field", field),
			zap.Int("bytes", size), zap.Int("limit", limit))
	}
	return nil
}

func serverFailure(message string) *failurepb.Failure {
	return &failurepb.Failure{
		Message: message,
		Source:  "vigil",
		FailureInfo: &failurepb.Failure_ServerFailureInfo{
			ServerFailureInfo: &failurepb.ServerFailureInfo{NonRetryable: true},
		},
	}
}

// failOversize fails the attempt because the worker sent too much, and returns the error that
// tells the worker why. If failing it did not work either, that error wins: the worker retries
// and meets the limit again.
func (h *WorkflowHandler) failOversize(ctx context.Context, ns *namespace.Namespace, token []byte, identity, message string, limitErr error) error {
	_, err := h.deps.History.RespondActivityTaskFailed(ctx, &activitypb.RespondActivityTaskFailedRequest{
		NamespaceId: ns.ID, TaskToken: token, Failure: serverFailure(message), Identity: identity,
	})
	if err != nil {
		return err
	}
	return invalid("%s; the activity failed: %s", limitErr.Error(), message)
}
