package activity

import (
	activityv1 "go.temporal.io/api/activity/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// Conversions to the public API, for the frontend.

// ToPollActivityTaskQueueResponse is the activity task a worker's poll receives. Workflow
// fields stay empty: a workflow_execution would switch the SDK into workflow-activity mode.
func ToPollActivityTaskQueueResponse(r *activitypb.RecordActivityTaskStartedResponse) *workflowservice.PollActivityTaskQueueResponse {
	return &workflowservice.PollActivityTaskQueueResponse{
		TaskToken:                   r.GetTaskToken(),
		WorkflowNamespace:           r.GetNamespace(),
		ActivityType:                r.GetActivityType(),
		ActivityId:                  r.GetActivityId(),
		ActivityRunId:               r.GetActivityRunId(),
		Header:                      r.GetHeader(),
		Input:                       r.GetInput(),
		HeartbeatDetails:            r.GetHeartbeatDetails(),
		ScheduledTime:               r.GetScheduledTime(),
		CurrentAttemptScheduledTime: r.GetCurrentAttemptScheduledTime(),
		StartedTime:                 r.GetStartedTime(),
		Attempt:                     r.GetAttempt(),
		ScheduleToCloseTimeout:      wireDuration(r.GetScheduleToCloseTimeout()),
		StartToCloseTimeout:         wireDuration(r.GetStartToCloseTimeout()),
		HeartbeatTimeout:            wireDuration(r.GetHeartbeatTimeout()),
		RetryPolicy:                 r.GetRetryPolicy(),
		Priority:                    r.GetPriority(),
	}
}

// ToActivityExecutionOutcome is PollActivityExecutionResponse.outcome; nil while open.
func ToActivityExecutionOutcome(o *activitypb.ActivityOutcome) *activityv1.ActivityExecutionOutcome {
	switch v := o.GetValue().(type) {
	case *activitypb.ActivityOutcome_Result:
		return &activityv1.ActivityExecutionOutcome{Value: &activityv1.ActivityExecutionOutcome_Result{Result: v.Result}}
	case *activitypb.ActivityOutcome_Failure:
		return &activityv1.ActivityExecutionOutcome{Value: &activityv1.ActivityExecutionOutcome_Failure{Failure: v.Failure}}
	}
	return nil
}

// ToActivityExecutionInfo is DescribeActivityExecutionResponse.info.
func ToActivityExecutionInfo(activityID, runID string, s *activitypb.ActivityState) *activityv1.ActivityExecutionInfo {
	info := &activityv1.ActivityExecutionInfo{
		ActivityId: activityID,
		RunId:      runID,
		// Never nil: the SDK's ActivityHandle.Describe reads its fields without a nil check.
		SearchAttributes:        &commonpb.SearchAttributes{},
		ActivityType:            s.GetActivityType(),
		TaskQueue:               s.GetTaskQueue(),
		ScheduleToCloseTimeout:  wireDuration(s.GetScheduleToCloseTimeout()),
		ScheduleToStartTimeout:  wireDuration(s.GetScheduleToStartTimeout()),
		StartToCloseTimeout:     wireDuration(s.GetStartToCloseTimeout()),
		HeartbeatTimeout:        wireDuration(s.GetHeartbeatTimeout()),
		RetryPolicy:             s.GetRetryPolicy(),
		HeartbeatDetails:        s.GetHeartbeatDetails(),
		LastHeartbeatTime:       s.GetLastHeartbeatTime(),
		LastStartedTime:         s.GetStartedTime(),
		Attempt:                 s.GetAttempt(),
		ScheduleTime:            s.GetScheduleTime(),
		ExpirationTime:          s.GetExpirationTime(),
		CloseTime:               s.GetCloseTime(),
		LastFailure:             s.GetLastFailure(),
		LastWorkerIdentity:      s.GetWorkerIdentity(),
		Header:                  s.GetHeader(),
		Priority:                s.GetPriority(),
		CanceledReason:          s.GetCancelReason(),
		TotalHeartbeatCount:     s.GetTotalHeartbeatCount(),
		LastAttemptCompleteTime: s.GetLastAttemptCompleteTime(),
		StartDelay:              s.GetStartDelay(),
		StateTransitionCount:    s.GetStateTransitionCount(),
	}
	if s.GetScheduleTime() != nil {
		// When the first attempt was due: the start delay after the start.
		info.ExecutionTime = timestamppb.New(s.GetScheduleTime().AsTime().Add(s.GetStartDelay().AsDuration()))
	}
	if s.GetCloseTime() != nil && s.GetScheduleTime() != nil {
		info.ExecutionDuration = durationpb.New(s.GetCloseTime().AsTime().Sub(s.GetScheduleTime().AsTime()))
	}
	info.Status = PublicStatus(s.GetStatus())
	if info.Status == enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING {
		switch {
		case s.GetCancelRequested():
			info.RunState = enumspb.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED
		case s.GetStatus() == statusPaused:
			info.RunState = enumspb.PENDING_ACTIVITY_STATE_PAUSED
		case s.GetStatus() == statusStarted && s.GetPause() != nil:
			info.RunState = enumspb.PENDING_ACTIVITY_STATE_PAUSE_REQUESTED
		case s.GetStatus() == statusStarted:
			info.RunState = enumspb.PENDING_ACTIVITY_STATE_STARTED
		default:
			info.RunState = enumspb.PENDING_ACTIVITY_STATE_SCHEDULED
		}
		if s.GetStatus() == statusScheduled && s.GetDispatchedStamp() < s.GetStamp() && s.GetAttemptScheduledTime() != nil {
			info.NextAttemptScheduleTime = s.GetAttemptScheduledTime()
		}
		if s.GetStatus() == statusScheduled {
			info.CurrentRetryInterval = s.GetCurrentRetryInterval()
		}
	}
	return info
}

// PublicStatus is the execution status the API shows for a stored status: a scheduled,
// started or paused activity is RUNNING.
func PublicStatus(st activitypb.ActivityStatus) enumspb.ActivityExecutionStatus {
	switch st {
	case statusScheduled, statusStarted, statusPaused:
		return enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING
	case statusCompleted:
		return enumspb.ACTIVITY_EXECUTION_STATUS_COMPLETED
	case statusFailed:
		return enumspb.ACTIVITY_EXECUTION_STATUS_FAILED
	case statusCanceled:
		return enumspb.ACTIVITY_EXECUTION_STATUS_CANCELED
	case statusTimedOut:
		return enumspb.ACTIVITY_EXECUTION_STATUS_TIMED_OUT
	case statusTerminated:
		return enumspb.ACTIVITY_EXECUTION_STATUS_TERMINATED
	}
	return enumspb.ACTIVITY_EXECUTION_STATUS_UNSPECIFIED
}
