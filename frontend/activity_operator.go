package frontend

import (
	"context"
	"math/rand/v2"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// The operator's commands on a standalone activity: pause, unpause, reset and update-options
// (chasm/activity/pause.go and options.go have their semantics). Each comes in two forms:
//   - the standalone-activity API (PauseActivityExecution, ...), which names the activity by
//     ID with workflow_id empty;
//   - the workflow-activity API (PauseActivity, ...) that `temporal activity pause/unpause/
//     reset/update-options` (CLI v1.5.1) sends: the execution names the activity itself, with
//     workflow_id empty or equal to the activity ID (the CLI refuses an empty one for unpause,
//     reset and update-options), run_id its run, and the activity is chosen by ID. Selecting
//     by type or "match all" is a workflow's feature: InvalidArgument.

// standaloneActivity checks the workflow_id of a request about a standalone activity.
func standaloneActivity(workflowID, activityID string) error {
	if workflowID != "" && workflowID != activityID {
		return invalid("workflow_id must be empty or the activity ID: vigil runs standalone activities only, not workflows")
	}
	return nil
}

// jitterDelay draws the delay of a jittered dispatch in [0, jitter).
func jitterDelay(jitter *durationpb.Duration) (*durationpb.Duration, error) {
	if jitter == nil {
		return nil, nil
	}
	if jitter.CheckValid() != nil || jitter.AsDuration() < 0 {
		return nil, invalid("jitter must be a valid, non-negative duration")
	}
	if jitter.AsDuration() == 0 {
		return nil, nil
	}
	return durationpb.New(time.Duration(rand.Int64N(int64(jitter.AsDuration())))), nil
}

// PauseActivityExecution pauses a standalone activity.
func (h *WorkflowHandler) PauseActivityExecution(ctx context.Context, req *workflowservice.PauseActivityExecutionRequest) (*workflowservice.PauseActivityExecutionResponse, error) {
	if err := h.pause(ctx, req.GetNamespace(), req.GetWorkflowId(), req.GetActivityId(), req.GetRunId(),
		req.GetIdentity(), req.GetReason(), req.GetRequestId()); err != nil {
		return nil, err
	}
	return &workflowservice.PauseActivityExecutionResponse{}, nil
}

// PauseActivity is the workflow-activity form of PauseActivityExecution.
func (h *WorkflowHandler) PauseActivity(ctx context.Context, req *workflowservice.PauseActivityRequest) (*workflowservice.PauseActivityResponse, error) {
	id, err := activityByID(req.GetId(), req.GetType())
	if err != nil {
		return nil, err
	}
	if err := h.pause(ctx, req.GetNamespace(), req.GetExecution().GetWorkflowId(), id, req.GetExecution().GetRunId(),
		req.GetIdentity(), req.GetReason(), req.GetRequestId()); err != nil {
		return nil, err
	}
	return &workflowservice.PauseActivityResponse{}, nil
}

func (h *WorkflowHandler) pause(ctx context.Context, namespaceName, workflowID, id, runID, identity, reason, requestID string) error {
	namespaceID, err := h.operatorTarget(namespaceName, workflowID, id)
	if err != nil {
		return err
	}
	_, err = h.deps.History.PauseActivity(ctx, &activitypb.PauseActivityRequest{
		NamespaceId: namespaceID, ActivityId: id, RunId: runID, Identity: identity, Reason: reason, RequestId: requestID,
	})
	return err
}

// operatorTarget checks the standalone activity an operator command names and returns its
// namespace's ID.
func (h *WorkflowHandler) operatorTarget(namespaceName, workflowID, id string) (string, error) {
	if err := firstError(requireNamespace(namespaceName), standaloneActivity(workflowID, id), activityID(id)); err != nil {
		return "", err
	}
	ns, err := h.deps.Namespaces.GetByName(namespaceName)
	if err != nil {
		return "", err
	}
	return ns.ID, nil
}

// UnpauseActivityExecution lifts the pause of a standalone activity.
func (h *WorkflowHandler) UnpauseActivityExecution(ctx context.Context, req *workflowservice.UnpauseActivityExecutionRequest) (*workflowservice.UnpauseActivityExecutionResponse, error) {
	if err := h.unpause(ctx, req.GetNamespace(), req.GetWorkflowId(), req.GetActivityId(), &activitypb.UnpauseActivityRequest{
		RunId: req.GetRunId(), Identity: req.GetIdentity(), RequestId: req.GetRequestId(),
	}, req.GetJitter()); err != nil {
		return nil, err
	}
	return &workflowservice.UnpauseActivityExecutionResponse{}, nil
}

// UnpauseActivity is the workflow-activity form of UnpauseActivityExecution; it may also reset
// the attempt count and the heartbeat details.
func (h *WorkflowHandler) UnpauseActivity(ctx context.Context, req *workflowservice.UnpauseActivityRequest) (*workflowservice.UnpauseActivityResponse, error) {
	if req.GetUnpauseAll() {
		return nil, invalid("unpause_all selects a workflow's activities: name the standalone activity by id")
	}
	id, err := activityByID(req.GetId(), req.GetType())
	if err != nil {
		return nil, err
	}
	if err := h.unpause(ctx, req.GetNamespace(), req.GetExecution().GetWorkflowId(), id, &activitypb.UnpauseActivityRequest{
		RunId: req.GetExecution().GetRunId(), Identity: req.GetIdentity(),
		ResetAttempts: req.GetResetAttempts(), ResetHeartbeat: req.GetResetHeartbeat(),
	}, req.GetJitter()); err != nil {
		return nil, err
	}
	return &workflowservice.UnpauseActivityResponse{}, nil
}

func (h *WorkflowHandler) unpause(ctx context.Context, namespaceName, workflowID, id string, req *activitypb.UnpauseActivityRequest, jitter *durationpb.Duration) error {
	namespaceID, err := h.operatorTarget(namespaceName, workflowID, id)
	if err != nil {
		return err
	}
	if req.JitterDelay, err = jitterDelay(jitter); err != nil {
		return err
	}
	req.NamespaceId, req.ActivityId = namespaceID, id
	_, err = h.deps.History.UnpauseActivity(ctx, req)
	return err
}

// ResetActivityExecution starts a standalone activity over at attempt 1.
func (h *WorkflowHandler) ResetActivityExecution(ctx context.Context, req *workflowservice.ResetActivityExecutionRequest) (*workflowservice.ResetActivityExecutionResponse, error) {
	if err := h.reset(ctx, req.GetNamespace(), req.GetWorkflowId(), req.GetActivityId(), &activitypb.ResetActivityRequest{
		RunId: req.GetRunId(), Identity: req.GetIdentity(), KeepPaused: req.GetKeepPaused(),
		ResetHeartbeat: req.GetResetHeartbeat(), RestoreOriginalOptions: req.GetRestoreOriginalOptions(),
		RequestId: req.GetRequestId(),
	}, req.GetJitter()); err != nil {
		return nil, err
	}
	return &workflowservice.ResetActivityExecutionResponse{}, nil
}

// ResetActivity is the workflow-activity form of ResetActivityExecution.
func (h *WorkflowHandler) ResetActivity(ctx context.Context, req *workflowservice.ResetActivityRequest) (*workflowservice.ResetActivityResponse, error) {
	if req.GetMatchAll() {
		return nil, invalid("match_all selects a workflow's activities: name the standalone activity by id")
	}
	id, err := activityByID(req.GetId(), req.GetType())
	if err != nil {
		return nil, err
	}
	if err := h.reset(ctx, req.GetNamespace(), req.GetExecution().GetWorkflowId(), id, &activitypb.ResetActivityRequest{
		RunId: req.GetExecution().GetRunId(), Identity: req.GetIdentity(), KeepPaused: req.GetKeepPaused(),
		ResetHeartbeat: req.GetResetHeartbeat(), RestoreOriginalOptions: req.GetRestoreOriginalOptions(),
	}, req.GetJitter()); err != nil {
		return nil, err
	}
	return &workflowservice.ResetActivityResponse{}, nil
}

func (h *WorkflowHandler) reset(ctx context.Context, namespaceName, workflowID, id string, req *activitypb.ResetActivityRequest, jitter *durationpb.Duration) error {
	namespaceID, err := h.operatorTarget(namespaceName, workflowID, id)
	if err != nil {
		return err
	}
	if req.JitterDelay, err = jitterDelay(jitter); err != nil {
		return err
	}
	req.NamespaceId, req.ActivityId = namespaceID, id
	_, err = h.deps.History.ResetActivity(ctx, req)
	return err
}

// UpdateActivityExecutionOptions changes the options of a standalone activity that an update
// mask names, and answers the options in force.
func (h *WorkflowHandler) UpdateActivityExecutionOptions(ctx context.Context, req *workflowservice.UpdateActivityExecutionOptionsRequest) (*workflowservice.UpdateActivityExecutionOptionsResponse, error) {
	resp, err := h.updateOptions(ctx, req.GetNamespace(), req.GetWorkflowId(), req.GetActivityId(), &activitypb.UpdateActivityOptionsRequest{
		RunId: req.GetRunId(), Identity: req.GetIdentity(), Options: req.GetActivityOptions(),
		UpdateMask: req.GetUpdateMask(), RestoreOriginal: req.GetRestoreOriginal(), RequestId: req.GetRequestId(),
	})
	if err != nil {
		return nil, err
	}
	return &workflowservice.UpdateActivityExecutionOptionsResponse{ActivityOptions: resp.GetOptions()}, nil
}

// UpdateActivityOptions is the workflow-activity form of UpdateActivityExecutionOptions.
func (h *WorkflowHandler) UpdateActivityOptions(ctx context.Context, req *workflowservice.UpdateActivityOptionsRequest) (*workflowservice.UpdateActivityOptionsResponse, error) {
	if req.GetMatchAll() {
		return nil, invalid("match_all selects a workflow's activities: name the standalone activity by id")
	}
	id, err := activityByID(req.GetId(), req.GetType())
	if err != nil {
		return nil, err
	}
	resp, err := h.updateOptions(ctx, req.GetNamespace(), req.GetExecution().GetWorkflowId(), id, &activitypb.UpdateActivityOptionsRequest{
		RunId: req.GetExecution().GetRunId(), Identity: req.GetIdentity(), Options: req.GetActivityOptions(),
		UpdateMask: req.GetUpdateMask(), RestoreOriginal: req.GetRestoreOriginal(),
	})
	if err != nil {
		return nil, err
	}
	return &workflowservice.UpdateActivityOptionsResponse{ActivityOptions: resp.GetOptions()}, nil
}

func (h *WorkflowHandler) updateOptions(ctx context.Context, namespaceName, workflowID, id string, req *activitypb.UpdateActivityOptionsRequest) (*activitypb.UpdateActivityOptionsResponse, error) {
	namespaceID, err := h.operatorTarget(namespaceName, workflowID, id)
	if err != nil {
		return nil, err
	}
	req.NamespaceId, req.ActivityId = namespaceID, id
	return h.deps.History.UpdateActivityOptions(ctx, req)
}

// activityByID is the activity a workflow-form request names: by ID only.
func activityByID(id, activityType string) (string, error) {
	if activityType != "" {
		return "", serviceerror.NewInvalidArgument(
			"selecting activities by type is a workflow's feature: name the standalone activity by id (--activity-id)")
	}
	return id, nil
}
