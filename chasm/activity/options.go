package activity

import (
	"slices"
	"strings"
	"time"
	"unicode"

	activityv1 "go.temporal.io/api/activity/v1"
	commonpb "go.temporal.io/api/common/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// UpdateActivityExecutionOptions: the options of an open activity change in place, as in
// Temporal. What changes when:
//   - a waiting (SCHEDULED) attempt is dispatched again under a new stamp, to the (new) task
//     queue, with the new schedule-to-start timeout; its retry backoff is kept;
//   - a running attempt keeps its stamp and worker; its start-to-close and heartbeat timers move
//     to the new deadlines (the old timers are no longer valid);
//   - schedule-to-close is counted from the same start, so the deadline moves by the change;
//   - the retry policy applies from the next failure on.

// EventOptionsUpdated carries the options to apply, already merged and normalised.
type EventOptionsUpdated struct {
	Options *activityv1.ActivityOptions
}

func applyOptionsUpdated(a *Activity, ctx chasm.MutableContext, ev EventOptionsUpdated) error {
	if a.OriginalOptions == nil {
		a.OriginalOptions = currentOptions(a)
	}
	o := ev.Options
	now := ctx.Now()
	oldS2C := a.ScheduleToCloseTimeout.AsDuration()
	a.TaskQueue = o.GetTaskQueue().GetName()
	a.ScheduleToCloseTimeout = o.GetScheduleToCloseTimeout()
	a.ScheduleToStartTimeout = o.GetScheduleToStartTimeout()
	a.StartToCloseTimeout = o.GetStartToCloseTimeout()
	a.HeartbeatTimeout = o.GetHeartbeatTimeout()
	a.RetryPolicy = o.GetRetryPolicy()
	a.Priority = o.GetPriority()

	if newS2C := a.ScheduleToCloseTimeout.AsDuration(); newS2C != oldS2C {
		// The first dispatch (start + start_delay) is expiration - old timeout; without an old
		// deadline it is taken as the schedule time.
		first := a.GetScheduleTime().AsTime()
		if a.ExpirationTime != nil && oldS2C > 0 {
			first = a.ExpirationTime.AsTime().Add(-oldS2C)
		}
		a.ExpirationTime = nil
		if newS2C > 0 {
			expiration := first.Add(newS2C)
			a.ExpirationTime = timestamppb.New(expiration)
			ctx.AddTask(chasm.TaskAttributes{ScheduledTime: expiration}, &activitypb.ScheduleToCloseTimeoutTask{})
		}
	}
	switch a.Status {
	case statusScheduled:
		scheduleAttempt(a, ctx, maxTime(now, attemptDueTime(a, now)))
	case statusStarted:
		ctx.AddTask(chasm.TaskAttributes{ScheduledTime: startToCloseDeadline(a)}, &activitypb.StartToCloseTimeoutTask{Stamp: a.Stamp})
		if deadline := heartbeatDeadline(a); !deadline.IsZero() {
			ctx.AddTask(chasm.TaskAttributes{ScheduledTime: deadline}, &activitypb.HeartbeatTimeoutTask{Stamp: a.Stamp})
		}
	}
	return nil
}

var (
	// TransitionOptionsUpdated changes a waiting activity's options; its attempt is dispatched
	// again under a new stamp.
	TransitionOptionsUpdated = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusScheduled}, statusScheduled, applyOptionsUpdated)
	// TransitionOptionsUpdatedWhileRunning changes the options of an activity whose attempt
	// runs; its timers move to the new deadlines.
	TransitionOptionsUpdatedWhileRunning = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusStarted, applyOptionsUpdated)
	// TransitionOptionsUpdatedWhilePaused changes a paused activity's options.
	TransitionOptionsUpdatedWhilePaused = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusPaused}, statusPaused, applyOptionsUpdated)
)

// updateOptions applies the transition of the activity's status.
func updateOptions(a *Activity, ctx chasm.MutableContext, o *activityv1.ActivityOptions) error {
	ev := EventOptionsUpdated{Options: o}
	switch a.Status {
	case statusStarted:
		return TransitionOptionsUpdatedWhileRunning.Apply(a, ctx, ev)
	case statusPaused:
		return TransitionOptionsUpdatedWhilePaused.Apply(a, ctx, ev)
	}
	return TransitionOptionsUpdated.Apply(a, ctx, ev)
}

// currentOptions is the activity's options as the public API shows them.
func currentOptions(a *Activity) *activityv1.ActivityOptions {
	return &activityv1.ActivityOptions{
		TaskQueue:              &taskqueuepb.TaskQueue{Name: a.TaskQueue},
		ScheduleToCloseTimeout: wireDuration(a.ScheduleToCloseTimeout),
		ScheduleToStartTimeout: wireDuration(a.ScheduleToStartTimeout),
		StartToCloseTimeout:    wireDuration(a.StartToCloseTimeout),
		HeartbeatTimeout:       wireDuration(a.HeartbeatTimeout),
		RetryPolicy:            a.RetryPolicy,
		Priority:               a.Priority,
	}
}

// ToActivityOptions is UpdateActivityExecutionOptionsResponse.activity_options.
func ToActivityOptions(s *activitypb.ActivityState) *activityv1.ActivityOptions {
	return proto.Clone(currentOptions(&Activity{ActivityState: s})).(*activityv1.ActivityOptions)
}

// optionPaths are the update mask paths UpdateActivityOptions applies, in camelCase (the mask
// may name them in snake_case too). task_queue_name is what `temporal activity update-options`
// sends for --task-queue.
var optionPaths = []string{
	"taskQueue", "taskQueue.name", "taskQueueName",
	"scheduleToCloseTimeout", "scheduleToStartTimeout", "startToCloseTimeout", "heartbeatTimeout",
	"retryPolicy", "retryPolicy.initialInterval", "retryPolicy.backoffCoefficient", "retryPolicy.maximumInterval",
	"retryPolicy.maximumAttempts", "retryPolicy.nonRetryableErrorTypes",
	"priority", "priority.priorityKey", "priority.fairnessKey", "priority.fairnessWeight",
}

// mergeOptions applies the masked fields of from onto a copy of into. An unknown path, or a
// path whose parent message is absent in from, is InvalidArgument.
func mergeOptions(into, from *activityv1.ActivityOptions, mask *fieldmaskpb.FieldMask) (*activityv1.ActivityOptions, error) {
	if len(mask.GetPaths()) == 0 {
		return nil, invalidArgument("update_mask names no option to update")
	}
	out := proto.Clone(into).(*activityv1.ActivityOptions)
	if out.RetryPolicy == nil {
		out.RetryPolicy = &commonpb.RetryPolicy{}
	}
	for _, raw := range mask.GetPaths() {
		path := camelPath(raw)
		if !slices.Contains(optionPaths, path) {
			return nil, invalidArgument("update_mask: unknown activity option %q", raw)
		}
		parent, _, _ := strings.Cut(path, ".")
		switch {
		case strings.HasPrefix(parent, "taskQueue") && from.GetTaskQueue() == nil,
			parent == "retryPolicy" && from.GetRetryPolicy() == nil && path != "retryPolicy",
			parent == "priority" && from.GetPriority() == nil && path != "priority":
			return nil, invalidArgument("update_mask names %q but activity_options has no %s", raw, parent)
		}
		switch path {
		case "taskQueue", "taskQueue.name", "taskQueueName":
			out.TaskQueue = &taskqueuepb.TaskQueue{Name: from.GetTaskQueue().GetName()}
		case "scheduleToCloseTimeout":
			out.ScheduleToCloseTimeout = from.GetScheduleToCloseTimeout()
		case "scheduleToStartTimeout":
			out.ScheduleToStartTimeout = from.GetScheduleToStartTimeout()
		case "startToCloseTimeout":
			out.StartToCloseTimeout = from.GetStartToCloseTimeout()
		case "heartbeatTimeout":
			out.HeartbeatTimeout = from.GetHeartbeatTimeout()
		case "retryPolicy":
			out.RetryPolicy = proto.Clone(from.GetRetryPolicy()).(*commonpb.RetryPolicy)
			if from.GetRetryPolicy() == nil {
				out.RetryPolicy = &commonpb.RetryPolicy{}
			}
		case "retryPolicy.initialInterval":
			out.RetryPolicy.InitialInterval = from.GetRetryPolicy().GetInitialInterval()
		case "retryPolicy.backoffCoefficient":
			out.RetryPolicy.BackoffCoefficient = from.GetRetryPolicy().GetBackoffCoefficient()
		case "retryPolicy.maximumInterval":
			out.RetryPolicy.MaximumInterval = from.GetRetryPolicy().GetMaximumInterval()
		case "retryPolicy.maximumAttempts":
			out.RetryPolicy.MaximumAttempts = from.GetRetryPolicy().GetMaximumAttempts()
		case "retryPolicy.nonRetryableErrorTypes":
			out.RetryPolicy.NonRetryableErrorTypes = from.GetRetryPolicy().GetNonRetryableErrorTypes()
		case "priority":
			out.Priority = from.GetPriority()
		default: // priority.*
			p := proto.Clone(out.GetPriority()).(*commonpb.Priority)
			if p == nil {
				p = &commonpb.Priority{}
			}
			switch path {
			case "priority.priorityKey":
				p.PriorityKey = from.GetPriority().GetPriorityKey()
			case "priority.fairnessKey":
				p.FairnessKey = from.GetPriority().GetFairnessKey()
			case "priority.fairnessWeight":
				p.FairnessWeight = from.GetPriority().GetFairnessWeight()
			}
			out.Priority = p
		}
	}
	return out, nil
}

// normalizeOptions checks merged options and fills the defaults and caps a start applies
// (normalizeStart): the same rules, so an update cannot make what a start would refuse.
func normalizeOptions(o *activityv1.ActivityOptions) (*activityv1.ActivityOptions, error) {
	if o.GetTaskQueue().GetName() == "" {
		return nil, invalidArgument("task_queue.name must not be empty")
	}
	t, err := normalizeTimeouts(o.GetScheduleToCloseTimeout(), o.GetScheduleToStartTimeout(),
		o.GetStartToCloseTimeout(), o.GetHeartbeatTimeout())
	if err != nil {
		return nil, err
	}
	policy, err := normalizeRetryPolicy(o.GetRetryPolicy())
	if err != nil {
		return nil, err
	}
	return &activityv1.ActivityOptions{
		TaskQueue:              &taskqueuepb.TaskQueue{Name: o.GetTaskQueue().GetName()},
		ScheduleToCloseTimeout: t.scheduleToClose,
		ScheduleToStartTimeout: t.scheduleToStart,
		StartToCloseTimeout:    t.startToClose,
		HeartbeatTimeout:       t.heartbeat,
		RetryPolicy:            policy,
		Priority:               o.GetPriority(),
	}, nil
}

// camelPath turns a snake_case field mask path into the camelCase form (both are accepted).
func camelPath(path string) string {
	parts := strings.Split(path, ".")
	for i, part := range parts {
		var b strings.Builder
		upper := false
		for j, r := range part {
			switch {
			case r == '_':
				upper = true
			case upper:
				b.WriteRune(unicode.ToUpper(r))
				upper = false
			case j == 0:
				b.WriteRune(unicode.ToLower(r))
			default:
				b.WriteRune(r)
			}
		}
		parts[i] = b.String()
	}
	return strings.Join(parts, ".")
}

// startToCloseDeadline is when the running attempt's start-to-close timeout fires.
func startToCloseDeadline(a *Activity) time.Time {
	return a.GetStartedTime().AsTime().Add(a.StartToCloseTimeout.AsDuration())
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
