package activity

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/common/log/tag"
)

// The operator's commands on one activity run (pause.go and options.go have the transitions).
// Each is one transaction on the activity's shard; a closed activity is FailedPrecondition.

// PauseActivity pauses the activity: a waiting one is not dispatched until unpaused; a running
// attempt is asked to stop through its heartbeats. Pausing a paused activity again is
// FailedPrecondition, unless it is a retry of the same request (same request ID).
func (h *Handler) PauseActivity(ctx context.Context, req *activitypb.PauseActivityRequest) (*activitypb.PauseActivityResponse, error) {
	err := h.operate(ctx, "PauseActivity", req.GetNamespaceId(), req.GetActivityId(), req.GetRunId(),
		func(mctx chasm.MutableContext, a *Activity) error {
			if a.Pause != nil {
				if req.GetRequestId() != "" && a.Pause.GetRequestId() == req.GetRequestId() {
					return errNothingToWrite
				}
				return failedPrecondition("activity %s is already paused", req.GetActivityId())
			}
			if a.CancelRequested {
				return failedPrecondition("activity %s cannot be paused: its cancellation was requested", req.GetActivityId())
			}
			ev := EventPaused{Identity: req.GetIdentity(), Reason: req.GetReason(), RequestID: req.GetRequestId()}
			if a.Status == statusStarted {
				return TransitionPauseRequested.Apply(a, mctx, ev)
			}
			return TransitionPaused.Apply(a, mctx, ev)
		})
	if err != nil {
		return nil, err
	}
	return &activitypb.PauseActivityResponse{}, nil
}

// UnpauseActivity lifts a pause: a paused activity's attempt is dispatched (after the jitter
// delay, or when its retry backoff ends unless attempts are reset); a running attempt is no
// longer asked to stop. Unpausing an activity that is not paused is a no-op, as Temporal's
// UnpauseActivity is.
func (h *Handler) UnpauseActivity(ctx context.Context, req *activitypb.UnpauseActivityRequest) (*activitypb.UnpauseActivityResponse, error) {
	if d := req.GetJitterDelay(); d != nil && (d.CheckValid() != nil || d.AsDuration() < 0) {
		return nil, invalidArgument("jitter must be a valid, non-negative duration")
	}
	err := h.operate(ctx, "UnpauseActivity", req.GetNamespaceId(), req.GetActivityId(), req.GetRunId(),
		func(mctx chasm.MutableContext, a *Activity) error {
			if a.Pause == nil || repeated(req.GetRequestId(), &a.LastUnpauseRequestId) {
				return errNothingToWrite
			}
			ev := EventUnpaused{
				ResetAttempts: req.GetResetAttempts(), ResetHeartbeat: req.GetResetHeartbeat(), Delay: req.GetJitterDelay().AsDuration(),
			}
			if a.Status == statusStarted {
				return TransitionUnpausedWhileRunning.Apply(a, mctx, ev)
			}
			return TransitionUnpaused.Apply(a, mctx, ev)
		})
	if err != nil {
		return nil, err
	}
	return &activitypb.UnpauseActivityResponse{}, nil
}

// ResetActivity starts the activity over at attempt 1: a waiting or paused one is dispatched
// at once (unless keep_paused), dropping any retry backoff; a running attempt is asked to stop
// through its heartbeats, and the reset applies when it ends (a completion still completes the
// activity). A pending cancellation, or a reset already pending, is FailedPrecondition.
func (h *Handler) ResetActivity(ctx context.Context, req *activitypb.ResetActivityRequest) (*activitypb.ResetActivityResponse, error) {
	if d := req.GetJitterDelay(); d != nil && (d.CheckValid() != nil || d.AsDuration() < 0) {
		return nil, invalidArgument("jitter must be a valid, non-negative duration")
	}
	err := h.operate(ctx, "ResetActivity", req.GetNamespaceId(), req.GetActivityId(), req.GetRunId(),
		func(mctx chasm.MutableContext, a *Activity) error {
			if repeated(req.GetRequestId(), &a.LastResetRequestId) {
				return errNothingToWrite
			}
			switch {
			case a.CancelRequested:
				return failedPrecondition("activity %s cannot be reset: its cancellation was requested", req.GetActivityId())
			case a.ResetRequested:
				return failedPrecondition("activity %s cannot be reset: a reset of its running attempt is pending", req.GetActivityId())
			}
			if req.GetRestoreOriginalOptions() && a.OriginalOptions != nil {
				if err := updateOptions(a, mctx, a.OriginalOptions); err != nil {
					return err
				}
			}
			ev := EventReset{KeepPaused: req.GetKeepPaused(), ResetHeartbeat: req.GetResetHeartbeat(), Delay: req.GetJitterDelay().AsDuration()}
			switch {
			case a.Status == statusStarted:
				return TransitionResetRequested.Apply(a, mctx, ev)
			case a.Status == statusPaused && req.GetKeepPaused():
				return TransitionResetKeepPaused.Apply(a, mctx, ev)
			}
			return TransitionReset.Apply(a, mctx, ev)
		})
	if err != nil {
		return nil, err
	}
	return &activitypb.ResetActivityResponse{}, nil
}

// UpdateActivityOptions changes the options an update mask names (options.go says what takes
// effect when) and answers the options in force. restore_original brings back the options the
// activity had before its first update.
func (h *Handler) UpdateActivityOptions(ctx context.Context, req *activitypb.UpdateActivityOptionsRequest) (*activitypb.UpdateActivityOptionsResponse, error) {
	if req.GetRestoreOriginal() && len(req.GetUpdateMask().GetPaths()) > 0 {
		return nil, invalidArgument("restore_original cannot be combined with an update_mask")
	}
	var options *activitypb.UpdateActivityOptionsResponse
	err := h.operate(ctx, "UpdateActivityOptions", req.GetNamespaceId(), req.GetActivityId(), req.GetRunId(),
		func(mctx chasm.MutableContext, a *Activity) error {
			if repeated(req.GetRequestId(), &a.LastUpdateOptionsRequestId) {
				options = &activitypb.UpdateActivityOptionsResponse{Options: ToActivityOptions(a.ActivityState)}
				return errNothingToWrite
			}
			var target = a.OriginalOptions
			if !req.GetRestoreOriginal() {
				merged, err := mergeOptions(currentOptions(a), req.GetOptions(), req.GetUpdateMask())
				if err != nil {
					return err
				}
				if target, err = normalizeOptions(merged); err != nil {
					return err
				}
			}
			changed := target != nil && !proto.Equal(target, currentOptions(a))
			if changed {
				if err := updateOptions(a, mctx, target); err != nil {
					return err
				}
			}
			options = &activitypb.UpdateActivityOptionsResponse{Options: ToActivityOptions(a.ActivityState)}
			if !changed {
				return errNothingToWrite // the same options, or none to restore
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return options, nil
}

// operate runs an operator command on an open activity run. fn returns errNothingToWrite for a
// command that changes nothing (a no-op succeeds without a write).
func (h *Handler) operate(ctx context.Context, operation, namespaceID, activityID, runID string, fn func(chasm.MutableContext, *Activity) error) error {
	ref, err := h.ref(namespaceID, activityID, runID)
	if err != nil {
		return err
	}
	var status activitypb.ActivityStatus
	_, err = chasm.UpdateComponent(ctx, h.engine, ref, func(mctx chasm.MutableContext, a *Activity) (struct{}, error) {
		if a.IsClosed() {
			return struct{}{}, failedPrecondition("activity %s is closed (%s)", activityID, StatusName(a.Status))
		}
		if err := fn(mctx, a); err != nil {
			return struct{}{}, err
		}
		status = a.Status
		return struct{}{}, nil
	})
	switch {
	case errors.Is(err, errNothingToWrite):
		return nil
	case err != nil:
		return err
	}
	h.logger.Info("activity operator command", tag.NamespaceID(namespaceID), tag.BusinessID(activityID),
		zap.String("operation", operation), zap.String("status", StatusName(status)))
	return nil
}

// repeated reports whether requestID is the one last applied, and records it as applied
// otherwise (the transaction that follows writes it with the change; a failed one writes
// nothing). An empty ID is never a repeat.
func repeated(requestID string, last *string) bool {
	if requestID == "" {
		return false
	}
	if *last == requestID {
		return true
	}
	*last = requestID
	return false
}
