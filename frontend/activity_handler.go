package frontend

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/frontend/searchattr"
	"github.com/vigilhq/vigil/matching"
)

// Standalone activities: the client side (start, result, describe, cancel) and the worker side
// (poll, heartbeat, respond). History owns every activity; matching only queues references to
// dispatched attempts, and the frontend turns a reference into a task by recording its start.

// StartActivityExecution starts a run of an activity ID. Request-ID deduplication and the ID
// reuse/conflict policies are history's: a conflicting start is AlreadyExists with an
// ActivityExecutionAlreadyStartedFailure detail, as history returns it.
func (h *WorkflowHandler) StartActivityExecution(ctx context.Context, req *workflowservice.StartActivityExecutionRequest) (*workflowservice.StartActivityExecutionResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	if err := h.blobs.check(ns, "input", req.GetInput()); err != nil {
		return nil, err
	}
	searchAttributes, err := searchattr.Validate(req.GetSearchAttributes(), ns.SearchAttributes)
	if err != nil {
		return nil, err
	}
	if err := searchattr.ValidateUserMetadata(req.GetUserMetadata()); err != nil {
		return nil, err
	}
	resp, err := h.deps.History.StartActivity(ctx, &activitypb.StartActivityRequest{
		NamespaceId:            ns.ID,
		Namespace:              ns.Name,
		ActivityId:             req.GetActivityId(),
		ActivityType:           req.GetActivityType(),
		TaskQueue:              req.GetTaskQueue().GetName(),
		ScheduleToCloseTimeout: req.GetScheduleToCloseTimeout(),
		ScheduleToStartTimeout: req.GetScheduleToStartTimeout(),
		StartToCloseTimeout:    req.GetStartToCloseTimeout(),
		HeartbeatTimeout:       req.GetHeartbeatTimeout(),
		StartDelay:             req.GetStartDelay(),
		RetryPolicy:            req.GetRetryPolicy(),
		Input:                  req.GetInput(),
		Header:                 req.GetHeader(),
		RequestId:              req.GetRequestId(),
		Identity:               req.GetIdentity(),
		IdReusePolicy:          req.GetIdReusePolicy(),
		IdConflictPolicy:       req.GetIdConflictPolicy(),
		Priority:               req.GetPriority(),
		SearchAttributes:       searchAttributes,
		UserMetadata:           req.GetUserMetadata(),
	})
	if err != nil {
		return nil, err
	}
	return &workflowservice.StartActivityExecutionResponse{RunId: resp.GetRunId(), Started: resp.GetStarted()}, nil
}

// PollActivityTaskQueue long-polls matching for a task of the queue and records its start in
// history on behalf of the polling worker, which the attempt is then bound to. A stale task
// (the activity moved on since it was queued) is skipped and matching is polled again within
// the same deadline. A task whose start could not be recorded goes back to matching.
//
// Like every poll it never answers InvalidArgument or NamespaceNotFound, which the SDK treats
// as fatal for the worker: an unknown namespace is Unavailable, a request
// without a task queue FailedPrecondition. Both make the worker back off and log.
func (h *WorkflowHandler) PollActivityTaskQueue(ctx context.Context, req *workflowservice.PollActivityTaskQueueRequest) (*workflowservice.PollActivityTaskQueueResponse, error) {
	ns, err := h.pollNamespace(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	taskQueue := req.GetTaskQueue().GetName()
	if taskQueue == "" {
		return nil, errPollFieldMissing("task_queue.name")
	}
	if h.deps.Matching == nil {
		if err := h.longPoll(ctx, req.GetWorkerInstanceKey()); err != nil {
			return nil, err
		}
		return &workflowservice.PollActivityTaskQueueResponse{}, nil
	}
	pollCtx, cancel := h.pollContext(ctx)
	defer cancel()
	poll := matching.ActivityPoll{
		NamespaceID:       ns.ID,
		TaskQueue:         taskQueue,
		Identity:          req.GetIdentity(),
		WorkerInstanceKey: req.GetWorkerInstanceKey(),
		RatePerSecond:     req.GetTaskQueueMetadata().GetMaxTasksPerSecond().GetValue(),
	}
	// One ID for the whole poll: history answers a retried start of the same task with the
	// same attempt instead of refusing it as already started.
	pollRequestID := uuid.NewString()
	for {
		ref, ok, err := h.deps.Matching.PollActivityTask(pollCtx, poll)
		if err != nil {
			if err := h.pollFailure(ctx, pollCtx, err); err != nil {
				return nil, err
			}
			return &workflowservice.PollActivityTaskQueueResponse{}, nil
		}
		if !ok {
			return &workflowservice.PollActivityTaskQueueResponse{}, nil
		}
		// The client's ctx, not pollCtx: a task matched just before the poll's deadline must
		// still be recorded (matching answers a margin before the client's deadline for that).
		started, err := h.deps.History.RecordActivityTaskStarted(ctx, &activitypb.RecordActivityTaskStartedRequest{
			NamespaceId:            ref.NamespaceID,
			ActivityId:             ref.ActivityID,
			RunId:                  ref.RunID,
			Stamp:                  ref.Stamp,
			Identity:               req.GetIdentity(),
			WorkerInstanceKey:      req.GetWorkerInstanceKey(),
			WorkerControlTaskQueue: req.GetWorkerControlTaskQueue(),
			PollRequestId:          pollRequestID,
		})
		if err == nil {
			// Once history recorded the start, a client that went away meanwhile costs nothing
			// more: the attempt's timeouts and the worker's liveness take it from here.
			resp := activity.ToPollActivityTaskQueueResponse(started)
			if h.deps.TaskTokens != nil {
				principal, _ := principalOf(ctx, ns)
				resp.TaskToken = h.deps.TaskTokens.Sign(resp.GetTaskToken(), principal)
			}
			return resp, nil
		}
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			h.deps.Logger.Debug("skipping a stale activity task", tag.NamespaceID(ref.NamespaceID),
				zap.String("activity-id", ref.ActivityID), zap.Int64("stamp", ref.Stamp), tag.Error(err))
			continue
		}
		// Whether or not history recorded it, the task goes back: if it did, the stamp check
		// refuses the returned copy; if it did not, the task would otherwise wait for
		// history's redispatch.
		if rerr := h.deps.Matching.ReturnActivityTask(ref); rerr != nil {
			h.deps.Logger.Warn("could not return an undelivered activity task to matching (history dispatches it again)",
				tag.NamespaceID(ref.NamespaceID), zap.String("activity-id", ref.ActivityID), tag.Error(rerr))
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, serviceerror.NewUnavailablef("could not start activity task %q: %v", ref.ActivityID, err)
	}
}

// RespondActivityTaskCompleted completes the attempt the token names; a stale token is NotFound.
func (h *WorkflowHandler) RespondActivityTaskCompleted(ctx context.Context, req *workflowservice.RespondActivityTaskCompletedRequest) (*workflowservice.RespondActivityTaskCompletedResponse, error) {
	ns, token, err := h.tokenNamespace(ctx, req.GetNamespace(), req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	if err := h.respondCompleted(ctx, ns, token, req); err != nil {
		return nil, err
	}
	return &workflowservice.RespondActivityTaskCompletedResponse{}, nil
}

// RespondActivityTaskFailed fails the attempt the token names (history decides about a retry).
func (h *WorkflowHandler) RespondActivityTaskFailed(ctx context.Context, req *workflowservice.RespondActivityTaskFailedRequest) (*workflowservice.RespondActivityTaskFailedResponse, error) {
	ns, token, err := h.tokenNamespace(ctx, req.GetNamespace(), req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	if err := h.respondFailed(ctx, ns, token, req); err != nil {
		return nil, err
	}
	return &workflowservice.RespondActivityTaskFailedResponse{}, nil
}

// RespondActivityTaskCanceled acknowledges a cancel request for the attempt the token names.
func (h *WorkflowHandler) RespondActivityTaskCanceled(ctx context.Context, req *workflowservice.RespondActivityTaskCanceledRequest) (*workflowservice.RespondActivityTaskCanceledResponse, error) {
	ns, token, err := h.tokenNamespace(ctx, req.GetNamespace(), req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	if err := h.respondCanceled(ctx, ns, token, req); err != nil {
		return nil, err
	}
	return &workflowservice.RespondActivityTaskCanceledResponse{}, nil
}

// RecordActivityTaskHeartbeat records the attempt's progress; cancel_requested tells the
// worker to stop. A stale token is NotFound, which makes the SDK cancel the activity.
func (h *WorkflowHandler) RecordActivityTaskHeartbeat(ctx context.Context, req *workflowservice.RecordActivityTaskHeartbeatRequest) (*workflowservice.RecordActivityTaskHeartbeatResponse, error) {
	ns, token, err := h.tokenNamespace(ctx, req.GetNamespace(), req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	hb, err := h.heartbeat(ctx, ns, token, req)
	if err != nil {
		return nil, err
	}
	return &workflowservice.RecordActivityTaskHeartbeatResponse{
		CancelRequested: hb.GetCancelRequested(), ActivityPaused: hb.GetActivityPaused(), ActivityReset: hb.GetActivityReset(),
	}, nil
}

// The ById variants (the SDK's async completion by activity ID) address the run's current
// attempt: the frontend reads its task token and answers with it, so the stamp still fences a
// completion that races a retry. Only standalone activities exist: workflow_id must be empty
// or the activity ID (standaloneActivity).

// RespondActivityTaskCompletedById completes the current attempt of a standalone activity.
func (h *WorkflowHandler) RespondActivityTaskCompletedById(ctx context.Context, req *workflowservice.RespondActivityTaskCompletedByIdRequest) (*workflowservice.RespondActivityTaskCompletedByIdResponse, error) {
	ns, token, err := h.currentAttempt(ctx, req.GetNamespace(), req.GetWorkflowId(), req.GetActivityId(), req.GetRunId())
	if err != nil {
		return nil, err
	}
	if err := h.respondCompleted(ctx, ns, token, req); err != nil {
		return nil, err
	}
	return &workflowservice.RespondActivityTaskCompletedByIdResponse{}, nil
}

// RespondActivityTaskFailedById fails the current attempt of a standalone activity.
func (h *WorkflowHandler) RespondActivityTaskFailedById(ctx context.Context, req *workflowservice.RespondActivityTaskFailedByIdRequest) (*workflowservice.RespondActivityTaskFailedByIdResponse, error) {
	ns, token, err := h.currentAttempt(ctx, req.GetNamespace(), req.GetWorkflowId(), req.GetActivityId(), req.GetRunId())
	if err != nil {
		return nil, err
	}
	if err := h.respondFailed(ctx, ns, token, req); err != nil {
		return nil, err
	}
	return &workflowservice.RespondActivityTaskFailedByIdResponse{}, nil
}

// RespondActivityTaskCanceledById acknowledges a cancel request for the current attempt.
func (h *WorkflowHandler) RespondActivityTaskCanceledById(ctx context.Context, req *workflowservice.RespondActivityTaskCanceledByIdRequest) (*workflowservice.RespondActivityTaskCanceledByIdResponse, error) {
	ns, token, err := h.currentAttempt(ctx, req.GetNamespace(), req.GetWorkflowId(), req.GetActivityId(), req.GetRunId())
	if err != nil {
		return nil, err
	}
	if err := h.respondCanceled(ctx, ns, token, req); err != nil {
		return nil, err
	}
	return &workflowservice.RespondActivityTaskCanceledByIdResponse{}, nil
}

// RecordActivityTaskHeartbeatById records a heartbeat of the current attempt.
func (h *WorkflowHandler) RecordActivityTaskHeartbeatById(ctx context.Context, req *workflowservice.RecordActivityTaskHeartbeatByIdRequest) (*workflowservice.RecordActivityTaskHeartbeatByIdResponse, error) {
	ns, token, err := h.currentAttempt(ctx, req.GetNamespace(), req.GetWorkflowId(), req.GetActivityId(), req.GetRunId())
	if err != nil {
		return nil, err
	}
	hb, err := h.heartbeat(ctx, ns, token, req)
	if err != nil {
		return nil, err
	}
	return &workflowservice.RecordActivityTaskHeartbeatByIdResponse{
		CancelRequested: hb.GetCancelRequested(), ActivityPaused: hb.GetActivityPaused(), ActivityReset: hb.GetActivityReset(),
	}, nil
}

// The token and ById requests share their payload getters.
type (
	completedRequest interface{ GetResult() *commonpb.Payloads }
	failedRequest    interface {
		GetFailure() *failurepb.Failure
		GetLastHeartbeatDetails() *commonpb.Payloads
	}
	detailsRequest  interface{ GetDetails() *commonpb.Payloads }
	identityRequest interface{ GetIdentity() string }
)

func (h *WorkflowHandler) respondCompleted(ctx context.Context, ns *namespace.Namespace, token []byte, req interface {
	completedRequest
	identityRequest
}) error {
	if err := h.blobs.check(ns, "result", req.GetResult()); err != nil {
		return h.failOversize(ctx, ns, token, req.GetIdentity(), failureResultExceedsLimit, err)
	}
	_, err := h.deps.History.RespondActivityTaskCompleted(ctx, &activitypb.RespondActivityTaskCompletedRequest{
		NamespaceId: ns.ID, TaskToken: token, Result: req.GetResult(), Identity: req.GetIdentity(),
	})
	return err
}

func (h *WorkflowHandler) respondFailed(ctx context.Context, ns *namespace.Namespace, token []byte, req interface {
	failedRequest
	identityRequest
}) error {
	failure, details := req.GetFailure(), req.GetLastHeartbeatDetails()
	if err := h.blobs.check(ns, "failure", failure); err != nil {
		failure = serverFailure(failureFailureExceedsLimit)
	}
	if err := h.blobs.check(ns, "last_heartbeat_details", details); err != nil {
		details = nil // the failure is what matters; the details would be refused on their own
	}
	_, err := h.deps.History.RespondActivityTaskFailed(ctx, &activitypb.RespondActivityTaskFailedRequest{
		NamespaceId: ns.ID, TaskToken: token, Failure: failure,
		LastHeartbeatDetails: details, Identity: req.GetIdentity(),
	})
	return err
}

func (h *WorkflowHandler) respondCanceled(ctx context.Context, ns *namespace.Namespace, token []byte, req interface {
	detailsRequest
	identityRequest
}) error {
	if err := h.blobs.check(ns, "details", req.GetDetails()); err != nil {
		return h.failOversize(ctx, ns, token, req.GetIdentity(), failureCancelDetailsExceedsLimit, err)
	}
	_, err := h.deps.History.RespondActivityTaskCanceled(ctx, &activitypb.RespondActivityTaskCanceledRequest{
		NamespaceId: ns.ID, TaskToken: token, Details: req.GetDetails(), Identity: req.GetIdentity(),
	})
	return err
}

func (h *WorkflowHandler) heartbeat(ctx context.Context, ns *namespace.Namespace, token []byte, req interface {
	detailsRequest
	identityRequest
}) (*activitypb.RecordActivityTaskHeartbeatResponse, error) {
	if err := h.blobs.check(ns, "details", req.GetDetails()); err != nil {
		return nil, h.failOversize(ctx, ns, token, req.GetIdentity(), failureHeartbeatDetailsExceed, err)
	}
	return h.deps.History.RecordActivityTaskHeartbeat(ctx, &activitypb.RecordActivityTaskHeartbeatRequest{
		NamespaceId: ns.ID, TaskToken: token, Details: req.GetDetails(), Identity: req.GetIdentity(),
	})
}

// tokenNamespace resolves the namespace of a worker call, verifies its task token's signature
// and checks that it is an activity token of that namespace. It returns the token history
// knows (without its signature). A forged or altered token is InvalidArgument, and the
// message says nothing of what it held: the IDs inside would help the next forgery.
//
// With auth on, the token is honoured only from the principal whose worker polled it (or an
// admin of the namespace): another principal's call is PermissionDenied.
func (h *WorkflowHandler) tokenNamespace(ctx context.Context, name string, taskToken []byte) (*namespace.Namespace, []byte, error) {
	ns, err := h.deps.Namespaces.GetByName(name)
	if err != nil {
		return nil, nil, err
	}
	if h.deps.TaskTokens != nil {
		inner, owner, err := h.deps.TaskTokens.Verify(taskToken)
		if err != nil {
			metrics.TaskTokensRefused.With(h.deps.MetricsScope).Inc(1)
			return nil, nil, invalid("task_token is not valid")
		}
		if principal, admin := principalOf(ctx, ns); principal != "" && !admin && principal != owner {
			return nil, nil, serviceerror.NewPermissionDenied("task_token was issued to a worker of another principal", "")
		}
		taskToken = inner
	}
	token, err := activity.DecodeTaskToken(taskToken)
	if err != nil {
		return nil, nil, invalid("task_token: %v", err)
	}
	if token.GetNamespaceId() != ns.ID {
		return nil, nil, invalid("task_token belongs to another namespace than %q", ns.Name)
	}
	return ns, taskToken, nil
}

// currentAttempt returns the task token of the started attempt of a standalone activity run
// (run ID empty: the current run). NotFound when no attempt is running.
func (h *WorkflowHandler) currentAttempt(ctx context.Context, namespaceName, workflowID, activityID, runID string) (*namespace.Namespace, []byte, error) {
	ns, err := h.deps.Namespaces.GetByName(namespaceName)
	if err != nil {
		return nil, nil, err
	}
	if err := standaloneActivity(workflowID, activityID); err != nil {
		return nil, nil, err
	}
	resp, err := h.deps.History.DescribeActivity(ctx, &activitypb.DescribeActivityRequest{
		NamespaceId: ns.ID, ActivityId: activityID, RunId: runID,
	})
	if err != nil {
		return nil, nil, err
	}
	state := resp.GetState()
	if state.GetStatus() != activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED || len(state.GetTaskToken()) == 0 {
		return nil, nil, serviceerror.NewNotFoundf("activity %q (run %q) has no running attempt (status %s)",
			activityID, resp.GetRunId(), activity.StatusName(state.GetStatus()))
	}
	return ns, state.GetTaskToken(), nil
}

// PollActivityExecution waits for the run to close and returns its outcome. History answers
// without an outcome shortly before the deadline it is given, which is at most the long-poll
// timeout away; the SDK then polls again. It is a long poll, so the
// interceptor does not validate it: it validates here (InvalidArgument is right for this
// client call, unlike for a worker's poll).
func (h *WorkflowHandler) PollActivityExecution(ctx context.Context, req *workflowservice.PollActivityExecutionRequest) (*workflowservice.PollActivityExecutionResponse, error) {
	if err := firstError(
		requireNamespace(req.GetNamespace()),
		activityID(req.GetActivityId()),
		maxLength("run_id", req.GetRunId(), MaxRunIDLength),
	); err != nil {
		return nil, err
	}
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	waitCtx, cancel := h.pollContext(ctx)
	defer cancel()
	resp, err := h.deps.History.PollActivityExecution(waitCtx, &activitypb.PollActivityExecutionRequest{
		NamespaceId: ns.ID, ActivityId: req.GetActivityId(), RunId: req.GetRunId(),
	})
	if err != nil {
		if waitCtx.Err() != nil && ctx.Err() == nil {
			// The wait ran out (or the server is stopping) before history answered: an empty
			// answer makes the SDK poll again, where an error would reach the caller of Get.
			return &workflowservice.PollActivityExecutionResponse{RunId: req.GetRunId()}, nil
		}
		return nil, err
	}
	return &workflowservice.PollActivityExecutionResponse{
		RunId:   resp.GetRunId(),
		Outcome: activity.ToActivityExecutionOutcome(resp.GetOutcome()),
	}, nil
}

// DescribeActivityExecution describes a run (run ID empty: the current run). Input, outcome,
// heartbeat details and last failure are included only when asked for. Long polling on
// changes (long_poll_token) is not supported.
func (h *WorkflowHandler) DescribeActivityExecution(ctx context.Context, req *workflowservice.DescribeActivityExecutionRequest) (*workflowservice.DescribeActivityExecutionResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	resp, err := h.deps.History.DescribeActivity(ctx, &activitypb.DescribeActivityRequest{
		NamespaceId: ns.ID, ActivityId: req.GetActivityId(), RunId: req.GetRunId(),
	})
	if err != nil {
		return nil, err
	}
	state := resp.GetState()
	info := activity.ToActivityExecutionInfo(req.GetActivityId(), resp.GetRunId(), state)
	info.SearchAttributes = searchAttributesOf(state)
	info.UserMetadata = state.GetUserMetadata()
	if !req.GetIncludeHeartbeatDetails() {
		info.HeartbeatDetails = nil
	}
	if !req.GetIncludeLastFailure() {
		info.LastFailure = nil
	}
	out := &workflowservice.DescribeActivityExecutionResponse{RunId: resp.GetRunId(), Info: info}
	if req.GetIncludeInput() {
		out.Input = state.GetInput()
	}
	if req.GetIncludeOutcome() {
		out.Outcome = activity.ToActivityExecutionOutcome(state.GetOutcome())
	}
	return out, nil
}

// RequestCancelActivityExecution cancels a scheduled run at once and asks the worker of a
// started one to stop (a CancelActivity worker command and cancel_requested on its heartbeats).
func (h *WorkflowHandler) RequestCancelActivityExecution(ctx context.Context, req *workflowservice.RequestCancelActivityExecutionRequest) (*workflowservice.RequestCancelActivityExecutionResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	_, err = h.deps.History.RequestCancelActivity(ctx, &activitypb.RequestCancelActivityRequest{
		NamespaceId: ns.ID,
		ActivityId:  req.GetActivityId(),
		RunId:       req.GetRunId(),
		RequestId:   req.GetRequestId(),
		Reason:      req.GetReason(),
		Identity:    req.GetIdentity(),
	})
	if err != nil {
		return nil, err
	}
	return &workflowservice.RequestCancelActivityExecutionResponse{}, nil
}

// pollNamespace resolves the namespace of a worker poll. An unknown namespace is Unavailable,
// never NamespaceNotFound (fatal for the worker): the worker backs off and
// logs "Failed to poll for task" until the namespace is configured.
func (h *WorkflowHandler) pollNamespace(name string) (*namespace.Namespace, error) {
	ns, err := h.deps.Namespaces.GetByName(name)
	if err != nil {
		return nil, serviceerror.NewUnavailablef("namespace %q is not served by this server", name)
	}
	return ns, nil
}

// errPollFieldMissing rejects a worker poll without a required field. FailedPrecondition and
// not InvalidArgument, which the SDK treats as fatal for the worker.
func errPollFieldMissing(field string) error {
	return serviceerror.NewFailedPreconditionf("%s is required", field)
}

// pollContext is ctx bounded by the long-poll timeout and by the long-poll margin before the
// client's deadline, and ended when the handler stops. The callee (matching, history) answers
// empty its own margin before that.
func (h *WorkflowHandler) pollContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(h.longPollTimeout)
	if d, ok := ctx.Deadline(); ok && d.Add(-h.longPollMargin).Before(deadline) {
		deadline = d.Add(-h.longPollMargin)
	}
	pollCtx, cancelDeadline := context.WithDeadline(ctx, deadline)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-h.stopping:
			cancelDeadline()
		case <-stop:
		}
	}()
	return pollCtx, func() {
		close(stop)
		<-done
		cancelDeadline()
	}
}

// pollFailure is the answer to a poll whose wait on matching failed: nil (answer empty) when
// only the poll's own bound ended, the client's error when the client went away, Unavailable
// otherwise (the SDK backs off and polls again).
func (h *WorkflowHandler) pollFailure(ctx, pollCtx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if pollCtx.Err() != nil {
		return nil
	}
	if errors.Is(err, matching.ErrStopped) {
		return serviceerror.NewUnavailable("matching is stopping")
	}
	return serviceerror.NewUnavailablef("poll failed: %v", err)
}
