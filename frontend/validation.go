package frontend

import (
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/frontend/query"
)

// Input limits. A request beyond any of them is rejected whole, with InvalidArgument naming
// the field, before anything is applied.
const (
	// MaxWorkerInstanceKeyLength bounds worker instance keys (SDKs send a 36-byte UUID).
	MaxWorkerInstanceKeyLength = 256
	// MaxIdentityLength bounds identities and other free-text names.
	MaxIdentityLength = 1000
	// MaxHeartbeatsPerRequest bounds the heartbeats of one RecordWorkerHeartbeat. The SDK sends
	// one per worker of a client, so this is far beyond any real process.
	MaxHeartbeatsPerRequest = 1000
	// MaxBindingsPerHeartbeat bounds bound + unbound activities of one extended heartbeat.
	MaxBindingsPerHeartbeat = 10000
	// MaxActivityIDLength bounds activity IDs, as Temporal's default ID length limit does.
	MaxActivityIDLength = 1000
	// MaxRunIDLength bounds activity run IDs.
	MaxRunIDLength = 256
	// MinActivityDuration is the shortest activity timeout or start delay: a timer the
	// server cannot honour to the nanosecond is a mistake, not a request.
	MinActivityDuration = time.Millisecond
	// MaxActivityDuration is the longest activity timeout (longer ones are clamped to it) or
	// start delay (longer ones are refused): 100 years.
	MaxActivityDuration = 100 * 365 * 24 * time.Hour
	// MaxHeartbeatRequestBytes bounds the encoded size of heartbeat and shutdown requests.
	// The server accepts 128 MiB messages for activity payloads; liveness traffic is small,
	// and a huge heartbeat would be stored on every renewal.
	MaxHeartbeatRequestBytes = 4 << 20
)

// validator checks requests before they reach a handler. Long polls are never validated: the
// SDK treats InvalidArgument from a poll as fatal for the worker.
type validator struct {
	namespaces *namespace.Registry
	minLease   func(namespace string) time.Duration
	maxLease   func(namespace string) time.Duration
}

func newValidator(deps Deps) *validator {
	return &validator{
		namespaces: deps.Namespaces,
		minLease:   dynamicconfig.MinLeaseDuration.Get(deps.DynamicConfig),
		maxLease:   dynamicconfig.MaxLeaseDuration.Get(deps.DynamicConfig),
	}
}

func invalid(format string, args ...any) error {
	return serviceerror.NewInvalidArgument(fmt.Sprintf(format, args...))
}

func (v *validator) validate(req any) error {
	if m, ok := req.(proto.Message); ok {
		if err := wellFormed(m.ProtoReflect()); err != nil {
			return err
		}
	}
	switch r := req.(type) {
	case *workflowservice.DescribeNamespaceRequest:
		if r.GetNamespace() == "" && r.GetId() == "" {
			return invalid("namespace or id is required")
		}
		return nil
	case *workflowservice.RecordWorkerHeartbeatRequest:
		return v.recordWorkerHeartbeat(r)
	case *workflowservice.ShutdownWorkerRequest:
		return v.shutdownWorker(r)
	case *workflowservice.DescribeWorkerRequest:
		return firstError(requireNamespace(r.GetNamespace()), workerKey("worker_instance_key", r.GetWorkerInstanceKey()))
	case *workflowservice.ListWorkersRequest:
		return firstError(requireNamespace(r.GetNamespace()), pageSize(r.GetPageSize()), queryLength(r.GetQuery()))
	case *workflowservice.CountWorkersRequest:
		return firstError(requireNamespace(r.GetNamespace()), queryLength(r.GetQuery()))
	case *workflowservice.StartActivityExecutionRequest:
		return startActivityExecution(r)
	case *workflowservice.ListActivityExecutionsRequest:
		return firstError(requireNamespace(r.GetNamespace()), pageSize(r.GetPageSize()), queryLength(r.GetQuery()))
	case *workflowservice.CountActivityExecutionsRequest:
		return firstError(requireNamespace(r.GetNamespace()), queryLength(r.GetQuery()))
	case *workflowservice.TerminateActivityExecutionRequest:
		return firstError(
			activityRun(r.GetNamespace(), r.GetActivityId(), r.GetRunId()),
			maxLength("identity", r.GetIdentity(), MaxIdentityLength),
			maxLength("request_id", r.GetRequestId(), MaxIdentityLength),
			maxLength("reason", r.GetReason(), MaxIdentityLength),
		)
	case *workflowservice.DeleteActivityExecutionRequest:
		return activityRun(r.GetNamespace(), r.GetActivityId(), r.GetRunId())
	case *workflowservice.DescribeActivityExecutionRequest:
		if len(r.GetLongPollToken()) > 0 {
			return invalid("long_poll_token is not supported: use PollActivityExecution to wait for the outcome")
		}
		return activityRun(r.GetNamespace(), r.GetActivityId(), r.GetRunId())
	case *workflowservice.RequestCancelActivityExecutionRequest:
		return firstError(
			activityRun(r.GetNamespace(), r.GetActivityId(), r.GetRunId()),
			maxLength("identity", r.GetIdentity(), MaxIdentityLength),
			maxLength("request_id", r.GetRequestId(), MaxIdentityLength),
			maxLength("reason", r.GetReason(), MaxIdentityLength),
		)
	case *workflowservice.RespondActivityTaskCompletedRequest:
		return activityTokenCall(r.GetNamespace(), r.GetTaskToken(), r.GetIdentity())
	case *workflowservice.RespondActivityTaskFailedRequest:
		return activityTokenCall(r.GetNamespace(), r.GetTaskToken(), r.GetIdentity())
	case *workflowservice.RespondActivityTaskCanceledRequest:
		return activityTokenCall(r.GetNamespace(), r.GetTaskToken(), r.GetIdentity())
	case *workflowservice.RecordActivityTaskHeartbeatRequest:
		return activityTokenCall(r.GetNamespace(), r.GetTaskToken(), r.GetIdentity())
	case *workflowservice.RespondActivityTaskCompletedByIdRequest:
		return activityByIDCall(r.GetNamespace(), r.GetActivityId(), r.GetRunId(), r.GetIdentity())
	case *workflowservice.RespondActivityTaskFailedByIdRequest:
		return activityByIDCall(r.GetNamespace(), r.GetActivityId(), r.GetRunId(), r.GetIdentity())
	case *workflowservice.RespondActivityTaskCanceledByIdRequest:
		return activityByIDCall(r.GetNamespace(), r.GetActivityId(), r.GetRunId(), r.GetIdentity())
	case *workflowservice.RecordActivityTaskHeartbeatByIdRequest:
		return activityByIDCall(r.GetNamespace(), r.GetActivityId(), r.GetRunId(), r.GetIdentity())
	case *workflowservice.RespondNexusTaskCompletedRequest:
		return firstError(requireNamespace(r.GetNamespace()), requireToken(r.GetTaskToken()))
	case *workflowservice.RespondNexusTaskFailedRequest:
		return firstError(requireNamespace(r.GetNamespace()), requireToken(r.GetTaskToken()))
	case *livenesspb.RecordHeartbeatRequest:
		return v.recordHeartbeat(r)
	case *livenesspb.DescribeWorkerLivenessRequest:
		return firstError(requireNamespace(r.GetNamespace()), workerKey("worker_instance_key", r.GetWorkerInstanceKey()))
	case *livenesspb.DrainWorkerRequest:
		return firstError(requireNamespace(r.GetNamespace()), workerKey("worker_instance_key", r.GetWorkerInstanceKey()),
			maxLength("identity", r.GetIdentity(), MaxIdentityLength))
	case *livenesspb.ListWorkerLivenessRequest:
		if _, ok := livenesspb.LivenessState_name[int32(r.GetState())]; !ok {
			return invalid("state %d is not a LivenessState", r.GetState())
		}
		return firstError(requireNamespace(r.GetNamespace()), pageSize(r.GetPageSize()))
	case *livenesspb.ListHostsRequest:
		return firstError(requireNamespace(r.GetNamespace()), pageSize(r.GetPageSize()))
	}
	return nil
}

func (v *validator) recordWorkerHeartbeat(r *workflowservice.RecordWorkerHeartbeatRequest) error {
	if err := firstError(
		requireNamespace(r.GetNamespace()),
		maxLength("identity", r.GetIdentity(), MaxIdentityLength),
		requestSize(r),
	); err != nil {
		return err
	}
	if n := len(r.GetWorkerHeartbeat()); n > MaxHeartbeatsPerRequest {
		return invalid("worker_heartbeat has %d entries, more than the limit of %d", n, MaxHeartbeatsPerRequest)
	}
	for i, hb := range r.GetWorkerHeartbeat() {
		if err := heartbeat(func() string { return fmt.Sprintf("worker_heartbeat[%d]", i) }, hb); err != nil {
			return err
		}
	}
	return nil
}

func (v *validator) shutdownWorker(r *workflowservice.ShutdownWorkerRequest) error {
	if err := firstError(
		requireNamespace(r.GetNamespace()),
		workerKey("worker_instance_key", r.GetWorkerInstanceKey()),
		maxLength("identity", r.GetIdentity(), MaxIdentityLength),
		requestSize(r),
	); err != nil {
		return err
	}
	if hb := r.GetWorkerHeartbeat(); hb != nil && hb.GetWorkerInstanceKey() != "" && hb.GetWorkerInstanceKey() != r.GetWorkerInstanceKey() {
		return invalid("worker_heartbeat.worker_instance_key %q differs from worker_instance_key %q",
			hb.GetWorkerInstanceKey(), r.GetWorkerInstanceKey())
	}
	return nil
}

func (v *validator) recordHeartbeat(r *livenesspb.RecordHeartbeatRequest) error {
	if err := firstError(
		requireNamespace(r.GetNamespace()),
		maxLength("identity", r.GetIdentity(), MaxIdentityLength),
		requestSize(r),
	); err != nil {
		return err
	}
	if r.GetWorkerHeartbeat() == nil {
		return invalid("worker_heartbeat is required")
	}
	if err := heartbeat(func() string { return "worker_heartbeat" }, r.GetWorkerHeartbeat()); err != nil {
		return err
	}
	if err := v.leaseDuration(r); err != nil {
		return err
	}
	if n := len(r.GetBoundActivities()) + len(r.GetUnboundActivities()); n > MaxBindingsPerHeartbeat {
		return invalid("bound_activities and unbound_activities hold %d entries, more than the limit of %d", n, MaxBindingsPerHeartbeat)
	}
	bound := make(map[bindingKey]struct{}, len(r.GetBoundActivities()))
	for i, b := range r.GetBoundActivities() {
		if err := binding(fmt.Sprintf("bound_activities[%d]", i), b); err != nil {
			return err
		}
		bound[bindingKey{b.GetActivityId(), b.GetRunId(), b.GetStamp()}] = struct{}{}
	}
	for i, b := range r.GetUnboundActivities() {
		field := fmt.Sprintf("unbound_activities[%d]", i)
		if err := binding(field, b); err != nil {
			return err
		}
		if _, both := bound[bindingKey{b.GetActivityId(), b.GetRunId(), b.GetStamp()}]; both {
			return invalid("%s: activity %q (run %q, stamp %d) is also in bound_activities", field, b.GetActivityId(), b.GetRunId(), b.GetStamp())
		}
	}
	return nil
}

// leaseDuration checks a requested lease against the namespace's bounds. Zero asks for the
// namespace default.
func (v *validator) leaseDuration(r *livenesspb.RecordHeartbeatRequest) error {
	d := r.GetLeaseDuration()
	if d == nil {
		return nil
	}
	if err := d.CheckValid(); err != nil {
		return invalid("lease_duration is not a valid duration: %v", err)
	}
	lease := d.AsDuration()
	if lease == 0 {
		return nil
	}
	if _, err := v.namespaces.GetByName(r.GetNamespace()); err != nil {
		// The handler answers NamespaceNotFound; bounds of an unknown namespace mean nothing.
		return nil
	}
	minLease, maxLease := v.minLease(r.GetNamespace()), v.maxLease(r.GetNamespace())
	if lease < minLease || lease > maxLease {
		return invalid("lease_duration %v is outside the namespace's bounds [%v, %v] (worker.minLeaseDuration, worker.maxLeaseDuration)",
			lease, minLease, maxLease)
	}
	return nil
}

type bindingKey struct {
	activityID, runID string
	stamp             int64
}

func binding(field string, b *livenesspb.ActivityBinding) error {
	if b == nil {
		return invalid("%s is empty", field)
	}
	if b.GetActivityId() == "" {
		return invalid("%s.activity_id is required", field)
	}
	if b.GetStamp() < 0 {
		return invalid("%s.stamp %d is negative", field, b.GetStamp())
	}
	return firstError(
		maxLength(field+".activity_id", b.GetActivityId(), MaxActivityIDLength),
		maxLength(field+".run_id", b.GetRunId(), MaxRunIDLength),
	)
}

func startActivityExecution(r *workflowservice.StartActivityExecutionRequest) error {
	if err := firstError(
		requireNamespace(r.GetNamespace()),
		activityID(r.GetActivityId()),
		maxLength("identity", r.GetIdentity(), MaxIdentityLength),
		maxLength("request_id", r.GetRequestId(), MaxIdentityLength),
	); err != nil {
		return err
	}
	if r.GetActivityType().GetName() == "" {
		return invalid("activity_type.name is required")
	}
	if r.GetTaskQueue().GetName() == "" {
		return invalid("task_queue.name is required")
	}
	if err := firstError(
		maxLength("activity_type.name", r.GetActivityType().GetName(), MaxIdentityLength),
		maxLength("task_queue.name", r.GetTaskQueue().GetName(), MaxIdentityLength),
	); err != nil {
		return err
	}
	for _, d := range []struct {
		field   string
		value   **durationpb.Duration
		timeout bool
	}{
		{"schedule_to_close_timeout", &r.ScheduleToCloseTimeout, true},
		{"schedule_to_start_timeout", &r.ScheduleToStartTimeout, true},
		{"start_to_close_timeout", &r.StartToCloseTimeout, true},
		{"heartbeat_timeout", &r.HeartbeatTimeout, true},
		{"start_delay", &r.StartDelay, false},
	} {
		value := *d.value
		if value == nil {
			continue
		}
		if err := value.CheckValid(); err != nil {
			return invalid("%s is not a valid duration: %v", d.field, err)
		}
		switch v := value.AsDuration(); {
		case v < 0:
			return invalid("%s %v is negative", d.field, v)
		case v > 0 && v < MinActivityDuration:
			return invalid("%s %v is shorter than the minimum of %v", d.field, v, MinActivityDuration)
		case v > MaxActivityDuration && d.timeout:
			// A timeout means "at most": a longer one than the server can keep is as good as
			// the longest it can keep. (Beyond about 292 years it would not even fit in a
			// time.Duration.)
			*d.value = durationpb.New(MaxActivityDuration)
		case v > MaxActivityDuration:
			return invalid("%s %v is longer than the maximum of %v", d.field, v, MaxActivityDuration)
		}
	}
	if r.GetScheduleToCloseTimeout().AsDuration() <= 0 && r.GetStartToCloseTimeout().AsDuration() <= 0 {
		return invalid("schedule_to_close_timeout or start_to_close_timeout is required")
	}
	if len(r.GetCompletionCallbacks()) > 0 {
		// Nobody would ever call them: fail the start rather than leave the caller waiting.
		return invalid("completion_callbacks are not supported")
	}
	return nil
}

// activityRun checks the namespace, activity ID and (optional) run ID of a client call.
func activityRun(namespaceName, id, runID string) error {
	return firstError(requireNamespace(namespaceName), activityID(id), maxLength("run_id", runID, MaxRunIDLength))
}

func activityTokenCall(namespaceName string, token []byte, identity string) error {
	return firstError(requireNamespace(namespaceName), requireToken(token), maxLength("identity", identity, MaxIdentityLength))
}

func activityByIDCall(namespaceName, id, runID, identity string) error {
	return firstError(activityRun(namespaceName, id, runID), maxLength("identity", identity, MaxIdentityLength))
}

func activityID(id string) error {
	if id == "" {
		return invalid("activity_id is required")
	}
	return maxLength("activity_id", id, MaxActivityIDLength)
}

func requireToken(token []byte) error {
	if len(token) == 0 {
		return invalid("task_token is required")
	}
	return nil
}

// heartbeat checks one worker heartbeat. field names it in an error, and is only called to
// build one: every heartbeat is checked, and nearly all pass.
func heartbeat(field func() string, hb *workerapipb.WorkerHeartbeat) error {
	if hb == nil {
		return invalid("%s is empty", field())
	}
	if hb.GetWorkerInstanceKey() == "" {
		return invalid("%s.worker_instance_key is required", field())
	}
	for _, f := range [...]struct {
		name, value string
		limit       int
	}{
		{"worker_instance_key", hb.GetWorkerInstanceKey(), MaxWorkerInstanceKeyLength},
		{"worker_identity", hb.GetWorkerIdentity(), MaxIdentityLength},
		{"task_queue", hb.GetTaskQueue(), MaxIdentityLength},
		{"host_info.host_name", hb.GetHostInfo().GetHostName(), MaxIdentityLength},
	} {
		if len(f.value) > f.limit {
			return maxLength(field()+"."+f.name, f.value, f.limit)
		}
	}
	return nil
}

func requireNamespace(name string) error {
	if name == "" {
		return invalid("namespace is required")
	}
	return maxLength("namespace", name, namespace.MaxNameLength)
}

func workerKey(field, key string) error {
	if key == "" {
		return invalid("%s is required", field)
	}
	return maxLength(field, key, MaxWorkerInstanceKeyLength)
}

func maxLength(field, value string, limit int) error {
	if len(value) > limit {
		return invalid("%s is %d bytes long, more than the limit of %d", field, len(value), limit)
	}
	return nil
}

func pageSize(n int32) error {
	if n < 0 {
		return invalid("page_size %d is negative", n)
	}
	return nil
}

func queryLength(q string) error { return maxLength("query", q, query.MaxLength) }

func requestSize(m proto.Message) error {
	if n := proto.Size(m); n > MaxHeartbeatRequestBytes {
		return invalid("request is %d bytes, more than the limit of %d", n, MaxHeartbeatRequestBytes)
	}
	return nil
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
