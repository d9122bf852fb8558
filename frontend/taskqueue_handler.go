//lint:file-ignore SA1019 the API marks DescribeTaskQueue's modes deprecated, but the temporal CLI
// and the SDKs still send them, and Temporal's server still answers them.

package frontend

import (
	"context"
	"errors"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/matching"
)

// defaultPollerRatePerSecond is the rate a poller that set no max_tasks_per_second is listed
// with: Temporal's default task dispatch rate, which its DescribeTaskQueue reports for such a
// worker. vigil itself limits no queue's dispatch rate.
const defaultPollerRatePerSecond = 100_000

// partitionPrefix starts the names of Temporal's non-root task queue partitions
// ("/_sys/<name>/<n>"). vigil keeps each task queue in one partition, its root.
const partitionPrefix = "/_sys/"

// DescribeTaskQueue describes a task queue as Temporal does, in both of its modes.
//
// vigil serves activity task queues only: an activity queue lists the identities that polled
// it within matching's PollerHistoryTTL (a worker's ShutdownWorker removes it at once) and its
// backlog; a workflow or Nexus queue of the same name has no pollers and no backlog, because
// vigil serves no workflow or Nexus tasks (the workflow polls an SDK worker may still send are
// held empty and not listed). The queue is described by the host that owns it.
//
// Enhanced mode (api_mode ENHANCED, what `temporal task-queue describe` sends) answers
// versions_info for the unversioned queue, the only version vigil has, with the requested
// task queue types (default workflow and activity). Legacy mode answers one type (default
// workflow): pollers, and the status, stats and config when asked. vigil keeps one partition per
// task queue, and does not version workers: a non-root partition or a build ID is
// InvalidArgument.
func (h *WorkflowHandler) DescribeTaskQueue(ctx context.Context, req *workflowservice.DescribeTaskQueueRequest) (*workflowservice.DescribeTaskQueueResponse, error) {
	ns, name, err := h.taskQueueRequest(req.GetNamespace(), req.GetTaskQueue())
	if err != nil {
		return nil, err
	}
	if req.GetApiMode() == enumspb.DESCRIBE_TASK_QUEUE_MODE_ENHANCED {
		return h.describeTaskQueueEnhanced(ctx, ns, name, req)
	}
	if !knownTaskQueueType(req.GetTaskQueueType()) {
		return nil, serviceerror.NewInvalidArgumentf("unknown task_queue_type %d", req.GetTaskQueueType())
	}
	taskQueueType := req.GetTaskQueueType()
	if taskQueueType == enumspb.TASK_QUEUE_TYPE_UNSPECIFIED {
		taskQueueType = enumspb.TASK_QUEUE_TYPE_WORKFLOW
	}
	var d matching.QueueDescription
	if taskQueueType == enumspb.TASK_QUEUE_TYPE_ACTIVITY && req.GetTaskQueue().GetKind() != enumspb.TASK_QUEUE_KIND_STICKY {
		if d, err = h.describeActivityQueue(ctx, ns, name); err != nil {
			return nil, err
		}
	}
	resp := &workflowservice.DescribeTaskQueueResponse{Pollers: pollerInfos(d)}
	if req.GetIncludeTaskQueueStatus() {
		// vigil's queues are in memory: there are no task ID blocks or ack levels to report,
		// and no dispatch rate limit.
		resp.TaskQueueStatus = &taskqueuepb.TaskQueueStatus{BacklogCountHint: d.BacklogCount}
	}
	if req.GetReportStats() {
		resp.Stats = taskQueueStats(d)
	}
	if req.GetReportConfig() {
		// No rate limit or fairness setting can be configured on a vigil task queue.
		resp.Config = &taskqueuepb.TaskQueueConfig{}
	}
	return resp, nil
}

func (h *WorkflowHandler) describeTaskQueueEnhanced(ctx context.Context, ns *namespace.Namespace, name string, req *workflowservice.DescribeTaskQueueRequest) (*workflowservice.DescribeTaskQueueResponse, error) {
	if req.GetTaskQueue().GetKind() == enumspb.TASK_QUEUE_KIND_STICKY {
		return nil, serviceerror.NewInvalidArgument("DescribeTaskQueue in enhanced mode cannot describe a sticky queue")
	}
	versions := req.GetVersions()
	for _, id := range versions.GetBuildIds() {
		if id != "" {
			return nil, serviceerror.NewInvalidArgumentf("build ID %q: vigil does not version workers; only the unversioned queue can be described", id)
		}
	}
	types := req.GetTaskQueueTypes()
	if len(types) == 0 {
		types = []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY}
	}
	typesInfo := make(map[int32]*taskqueuepb.TaskQueueTypeInfo, len(types))
	for _, t := range types {
		if t == enumspb.TASK_QUEUE_TYPE_UNSPECIFIED || !knownTaskQueueType(t) {
			return nil, serviceerror.NewInvalidArgumentf("unknown task queue type %d", t)
		}
		var d matching.QueueDescription
		if t == enumspb.TASK_QUEUE_TYPE_ACTIVITY {
			var err error
			if d, err = h.describeActivityQueue(ctx, ns, name); err != nil {
				return nil, err
			}
		}
		info := &taskqueuepb.TaskQueueTypeInfo{}
		if req.GetReportPollers() {
			info.Pollers = pollerInfos(d)
		}
		if req.GetReportStats() {
			info.Stats = taskQueueStats(d)
		}
		typesInfo[int32(t)] = info
	}
	version := &taskqueuepb.TaskQueueVersionInfo{TypesInfo: typesInfo}
	if req.GetReportTaskReachability() {
		// New activities of the queue always go to its unversioned workers.
		version.TaskReachability = enumspb.BUILD_ID_TASK_REACHABILITY_REACHABLE
	}
	// The unversioned queue is the only version: the default selection, Unversioned and
	// AllActive all name it, and so does an empty build ID.
	return &workflowservice.DescribeTaskQueueResponse{
		VersionsInfo: map[string]*taskqueuepb.TaskQueueVersionInfo{"": version},
	}, nil
}

// ListTaskQueuePartitions lists the one partition vigil keeps of an activity task queue, with
// the ID of the host that owns it in a cluster. vigil has no workflow task queues.
func (h *WorkflowHandler) ListTaskQueuePartitions(ctx context.Context, req *workflowservice.ListTaskQueuePartitionsRequest) (*workflowservice.ListTaskQueuePartitionsResponse, error) {
	ns, name, err := h.taskQueueRequest(req.GetNamespace(), req.GetTaskQueue())
	if err != nil {
		return nil, err
	}
	d, err := h.describeActivityQueue(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &workflowservice.ListTaskQueuePartitionsResponse{
		ActivityTaskQueuePartitions: []*taskqueuepb.TaskQueuePartitionMetadata{{Key: name, OwnerHostName: d.Owner}},
		WorkflowTaskQueuePartitions: []*taskqueuepb.TaskQueuePartitionMetadata{},
	}, nil
}

// taskQueueRequest checks the namespace and task queue of a task queue request.
func (h *WorkflowHandler) taskQueueRequest(nsName string, tq *taskqueuepb.TaskQueue) (*namespace.Namespace, string, error) {
	name := tq.GetName()
	if err := firstError(
		requireNamespace(nsName),
		maxLength("task_queue.name", name, MaxIdentityLength),
	); err != nil {
		return nil, "", err
	}
	if name == "" {
		return nil, "", invalid("task_queue.name is required")
	}
	if strings.HasPrefix(name, partitionPrefix) {
		return nil, "", serviceerror.NewInvalidArgumentf("task queue %q names a partition: vigil keeps each task queue in one partition, named by the task queue's own name", name)
	}
	if _, ok := enumspb.TaskQueueKind_name[int32(tq.GetKind())]; !ok {
		return nil, "", serviceerror.NewInvalidArgumentf("unknown task queue kind %d", tq.GetKind())
	}
	ns, err := h.deps.Namespaces.GetByName(nsName)
	if err != nil {
		return nil, "", err
	}
	return ns, name, nil
}

func knownTaskQueueType(t enumspb.TaskQueueType) bool {
	_, ok := enumspb.TaskQueueType_name[int32(t)]
	return ok
}

// describeActivityQueue asks matching (the queue's owner) about an activity queue.
func (h *WorkflowHandler) describeActivityQueue(ctx context.Context, ns *namespace.Namespace, name string) (matching.QueueDescription, error) {
	if h.deps.Matching == nil {
		return matching.QueueDescription{}, nil
	}
	d, err := h.deps.Matching.DescribeActivityQueue(ctx, ns.ID, name)
	if err != nil {
		return matching.QueueDescription{}, matchingError(err)
	}
	return d, nil
}

// matchingError gives a matching error the status a caller of a short call acts on. The
// Client's own errors (Unavailable while a queue changes hosts, the caller's context) pass.
func matchingError(err error) error {
	switch {
	case errors.Is(err, matching.ErrStopped):
		return serviceerror.NewUnavailable("matching is stopping")
	case errors.Is(err, matching.ErrInvalidArgument):
		return serviceerror.NewInvalidArgument(err.Error())
	}
	return err
}

func pollerInfos(d matching.QueueDescription) []*taskqueuepb.PollerInfo {
	out := make([]*taskqueuepb.PollerInfo, 0, len(d.Pollers))
	for _, p := range d.Pollers {
		rps := p.RatePerSecond
		if rps <= 0 {
			rps = defaultPollerRatePerSecond
		}
		out = append(out, &taskqueuepb.PollerInfo{
			Identity: p.Identity, LastAccessTime: timestamppb.New(p.LastAccessTime), RatePerSecond: rps,
		})
	}
	return out
}

func taskQueueStats(d matching.QueueDescription) *taskqueuepb.TaskQueueStats {
	return &taskqueuepb.TaskQueueStats{
		ApproximateBacklogCount: d.BacklogCount,
		ApproximateBacklogAge:   durationpb.New(d.BacklogAge),
		TasksAddRate:            float32(d.TasksAddRate),
		TasksDispatchRate:       float32(d.TasksDispatchRate),
	}
}
