package frontend

import (
	"context"

	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=history_client.go -destination=history_client_mock.go -package=frontend

// HistoryClient is what the frontend needs from history: the worker and standalone-activity
// RPCs, each sent to the host that owns the shard concerned. Errors are serviceerror values.
// Reads and calls whose repetition does nothing more are sent chasm.Resendable, so that one
// caught on an owner that stopped answering is answered by the shard's next owner; the others
// (an attempt's completion, a termination, a deletion) are answered Unavailable then.
type HistoryClient interface {
	// ShardFor returns the shard that owns a worker (its business ID is its instance key).
	ShardFor(namespaceID, workerInstanceKey string) int32
	// RecordHeartbeats records heartbeats of workers that all live on req.ShardId.
	RecordHeartbeats(ctx context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error)
	// ShutdownWorker marks req.WorkerInstanceKey INACTIVE (reason SHUTDOWN).
	ShutdownWorker(ctx context.Context, req *workerpb.ShutdownWorkerRequest) (*workerpb.ShutdownWorkerResponse, error)
	// DrainWorker asks req.WorkerInstanceKey to drain.
	DrainWorker(ctx context.Context, req *workerpb.DrainWorkerRequest) (*workerpb.DrainWorkerResponse, error)
	// DescribeWorker returns the liveness record of req.WorkerInstanceKey.
	DescribeWorker(ctx context.Context, req *workerpb.DescribeWorkerRequest) (*workerpb.DescribeWorkerResponse, error)
	// ListWorkers pages through every worker of a namespace, whatever its shard.
	ListWorkers(ctx context.Context, req *workerpb.ListWorkersRequest) (*workerpb.ListWorkersResponse, error)

	// The activity RPCs go to the shard of (namespace_id, activity_id); the calls that carry a
	// task token are routed by the activity ID inside it.

	StartActivity(ctx context.Context, req *activitypb.StartActivityRequest) (*activitypb.StartActivityResponse, error)
	// RecordActivityTaskStarted is NotFound when the matching task is stale.
	RecordActivityTaskStarted(ctx context.Context, req *activitypb.RecordActivityTaskStartedRequest) (*activitypb.RecordActivityTaskStartedResponse, error)
	RespondActivityTaskCompleted(ctx context.Context, req *activitypb.RespondActivityTaskCompletedRequest) (*activitypb.RespondActivityTaskCompletedResponse, error)
	RespondActivityTaskFailed(ctx context.Context, req *activitypb.RespondActivityTaskFailedRequest) (*activitypb.RespondActivityTaskFailedResponse, error)
	RespondActivityTaskCanceled(ctx context.Context, req *activitypb.RespondActivityTaskCanceledRequest) (*activitypb.RespondActivityTaskCanceledResponse, error)
	RecordActivityTaskHeartbeat(ctx context.Context, req *activitypb.RecordActivityTaskHeartbeatRequest) (*activitypb.RecordActivityTaskHeartbeatResponse, error)
	// PollActivityExecution answers without an outcome shortly before ctx's deadline.
	PollActivityExecution(ctx context.Context, req *activitypb.PollActivityExecutionRequest) (*activitypb.PollActivityExecutionResponse, error)
	DescribeActivity(ctx context.Context, req *activitypb.DescribeActivityRequest) (*activitypb.DescribeActivityResponse, error)
	RequestCancelActivity(ctx context.Context, req *activitypb.RequestCancelActivityRequest) (*activitypb.RequestCancelActivityResponse, error)
	TerminateActivity(ctx context.Context, req *activitypb.TerminateActivityRequest) (*activitypb.TerminateActivityResponse, error)
	DeleteActivity(ctx context.Context, req *activitypb.DeleteActivityRequest) (*activitypb.DeleteActivityResponse, error)
	// ListActivities pages through every activity of a namespace, whatever its shard.
	ListActivities(ctx context.Context, req *activitypb.ListActivitiesRequest) (*activitypb.ListActivitiesResponse, error)
	// The operator's commands on one activity.
	PauseActivity(ctx context.Context, req *activitypb.PauseActivityRequest) (*activitypb.PauseActivityResponse, error)
	UnpauseActivity(ctx context.Context, req *activitypb.UnpauseActivityRequest) (*activitypb.UnpauseActivityResponse, error)
	ResetActivity(ctx context.Context, req *activitypb.ResetActivityRequest) (*activitypb.ResetActivityResponse, error)
	UpdateActivityOptions(ctx context.Context, req *activitypb.UpdateActivityOptionsRequest) (*activitypb.UpdateActivityOptionsResponse, error)
}

// Router maps workers to shards and shards to connections; *history.Router implements it.
type Router interface {
	ShardFor(namespaceID, businessID string) int32
	ConnForShard(shardID int32) (grpc.ClientConnInterface, error)
}

// listShard is where ListWorkers is sent. History answers it for the whole namespace from any
// shard's host; shards are numbered from 1.
const listShard int32 = 1

// resendableWith marks a call chasm.Resendable when it carries the request ID its handler
// deduplicates by: a second delivery then returns what the first did.
func resendableWith(requestID string) []grpc.CallOption {
	if requestID == "" {
		return nil
	}
	return []grpc.CallOption{chasm.Resendable}
}

// NewHistoryClient returns a HistoryClient that routes each call through router.
func NewHistoryClient(router Router) HistoryClient { return &routedHistoryClient{router: router} }

type routedHistoryClient struct{ router Router }

func (c *routedHistoryClient) client(shardID int32) (workerpb.WorkerHistoryServiceClient, error) {
	conn, err := c.router.ConnForShard(shardID)
	if err != nil {
		return nil, err
	}
	return workerpb.NewWorkerHistoryServiceClient(conn), nil
}

func (c *routedHistoryClient) ShardFor(namespaceID, workerInstanceKey string) int32 {
	return c.router.ShardFor(namespaceID, workerInstanceKey)
}

func (c *routedHistoryClient) RecordHeartbeats(ctx context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
	client, err := c.client(req.GetShardId())
	if err != nil {
		return nil, err
	}
	// The heartbeat path's request and reply are not copied when the shard is this process's
	// own: recordHeartbeats builds a request per call and only reads the reply, and the
	// worker handler neither changes nor keeps either.
	return client.RecordHeartbeats(ctx, req, chasm.ByReference, chasm.Resendable)
}

func (c *routedHistoryClient) ShutdownWorker(ctx context.Context, req *workerpb.ShutdownWorkerRequest) (*workerpb.ShutdownWorkerResponse, error) {
	client, err := c.client(c.ShardFor(req.GetNamespaceId(), req.GetWorkerInstanceKey()))
	if err != nil {
		return nil, err
	}
	return client.ShutdownWorker(ctx, req, chasm.Resendable)
}

func (c *routedHistoryClient) DrainWorker(ctx context.Context, req *workerpb.DrainWorkerRequest) (*workerpb.DrainWorkerResponse, error) {
	client, err := c.client(c.ShardFor(req.GetNamespaceId(), req.GetWorkerInstanceKey()))
	if err != nil {
		return nil, err
	}
	return client.DrainWorker(ctx, req, chasm.Resendable)
}

func (c *routedHistoryClient) DescribeWorker(ctx context.Context, req *workerpb.DescribeWorkerRequest) (*workerpb.DescribeWorkerResponse, error) {
	client, err := c.client(c.ShardFor(req.GetNamespaceId(), req.GetWorkerInstanceKey()))
	if err != nil {
		return nil, err
	}
	return client.DescribeWorker(ctx, req, chasm.Resendable)
}

func (c *routedHistoryClient) ListWorkers(ctx context.Context, req *workerpb.ListWorkersRequest) (*workerpb.ListWorkersResponse, error) {
	client, err := c.client(listShard)
	if err != nil {
		return nil, err
	}
	return client.ListWorkers(ctx, req, chasm.Resendable)
}

func (c *routedHistoryClient) activityClient(namespaceID, activityID string) (activitypb.ActivityHistoryServiceClient, error) {
	conn, err := c.router.ConnForShard(c.router.ShardFor(namespaceID, activityID))
	if err != nil {
		return nil, err
	}
	return activitypb.NewActivityHistoryServiceClient(conn), nil
}

// tokenClient routes a call by the activity ID its task token names. A token that does not
// parse is InvalidArgument.
func (c *routedHistoryClient) tokenClient(namespaceID string, taskToken []byte) (activitypb.ActivityHistoryServiceClient, error) {
	token, err := activity.DecodeTaskToken(taskToken)
	if err != nil {
		return nil, err
	}
	return c.activityClient(namespaceID, token.GetActivityId())
}

func (c *routedHistoryClient) StartActivity(ctx context.Context, req *activitypb.StartActivityRequest) (*activitypb.StartActivityResponse, error) {
	client, err := c.activityClient(req.GetNamespaceId(), req.GetActivityId())
	if err != nil {
		return nil, err
	}
	return client.StartActivity(ctx, req, resendableWith(req.GetRequestId())...)
}

func (c *routedHistoryClient) RecordActivityTaskStarted(ctx context.Context, req *activitypb.RecordActivityTaskStartedRequest) (*activitypb.RecordActivityTaskStartedResponse, error) {
	client, err := c.activityClient(req.GetNamespaceId(), req.GetActivityId())
	if err != nil {
		return nil, err
	}
	return client.RecordActivityTaskStarted(ctx, req, resendableWith(req.GetPollRequestId())...)
}

func (c *routedHistoryClient) RespondActivityTaskCompleted(ctx context.Context, req *activitypb.RespondActivityTaskCompletedRequest) (*activitypb.RespondActivityTaskCompletedResponse, error) {
	client, err := c.tokenClient(req.GetNamespaceId(), req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	return client.RespondActivityTaskCompleted(ctx, req)
}

func (c *routedHistoryClient) RespondActivityTaskFailed(ctx context.Context, req *activitypb.RespondActivityTaskFailedRequest) (*activitypb.RespondActivityTaskFailedResponse, error) {
	client, err := c.tokenClient(req.GetNamespaceId(), req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	return client.RespondActivityTaskFailed(ctx, req)
}

func (c *routedHistoryClient) RespondActivityTaskCanceled(ctx context.Context, req *activitypb.RespondActivityTaskCanceledRequest) (*activitypb.RespondActivityTaskCanceledResponse, error) {
	client, err := c.tokenClient(req.GetNamespaceId(), req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	return client.RespondActivityTaskCanceled(ctx, req)
}

func (c *routedHistoryClient) RecordActivityTaskHeartbeat(ctx context.Context, req *activitypb.RecordActivityTaskHeartbeatRequest) (*activitypb.RecordActivityTaskHeartbeatResponse, error) {
	client, err := c.tokenClient(req.GetNamespaceId(), req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	return client.RecordActivityTaskHeartbeat(ctx, req, chasm.Resendable)
}

func (c *routedHistoryClient) PollActivityExecution(ctx context.Context, req *activitypb.PollActivityExecutionRequest) (*activitypb.PollActivityExecutionResponse, error) {
	client, err := c.activityClient(req.GetNamespaceId(), req.GetActivityId())
	if err != nil {
		return nil, err
	}
	return client.PollActivityExecution(ctx, req, chasm.Resendable)
}

func (c *routedHistoryClient) DescribeActivity(ctx context.Context, req *activitypb.DescribeActivityRequest) (*activitypb.DescribeActivityResponse, error) {
	client, err := c.activityClient(req.GetNamespaceId(), req.GetActivityId())
	if err != nil {
		return nil, err
	}
	return client.DescribeActivity(ctx, req, chasm.Resendable)
}

func (c *routedHistoryClient) RequestCancelActivity(ctx context.Context, req *activitypb.RequestCancelActivityRequest) (*activitypb.RequestCancelActivityResponse, error) {
	client, err := c.activityClient(req.GetNamespaceId(), req.GetActivityId())
	if err != nil {
		return nil, err
	}
	return client.RequestCancelActivity(ctx, req, chasm.Resendable)
}

func (c *routedHistoryClient) TerminateActivity(ctx context.Context, req *activitypb.TerminateActivityRequest) (*activitypb.TerminateActivityResponse, error) {
	client, err := c.activityClient(req.GetNamespaceId(), req.GetActivityId())
	if err != nil {
		return nil, err
	}
	return client.TerminateActivity(ctx, req)
}

func (c *routedHistoryClient) DeleteActivity(ctx context.Context, req *activitypb.DeleteActivityRequest) (*activitypb.DeleteActivityResponse, error) {
	client, err := c.activityClient(req.GetNamespaceId(), req.GetActivityId())
	if err != nil {
		return nil, err
	}
	return client.DeleteActivity(ctx, req)
}

func (c *routedHistoryClient) ListActivities(ctx context.Context, req *activitypb.ListActivitiesRequest) (*activitypb.ListActivitiesResponse, error) {
	conn, err := c.router.ConnForShard(listShard)
	if err != nil {
		return nil, err
	}
	return activitypb.NewActivityHistoryServiceClient(conn).ListActivities(ctx, req, chasm.Resendable)
}

func (c *routedHistoryClient) PauseActivity(ctx context.Context, req *activitypb.PauseActivityRequest) (*activitypb.PauseActivityResponse, error) {
	client, err := c.activityClient(req.GetNamespaceId(), req.GetActivityId())
	if err != nil {
		return nil, err
	}
	return client.PauseActivity(ctx, req, resendableWith(req.GetRequestId())...)
}

func (c *routedHistoryClient) UnpauseActivity(ctx context.Context, req *activitypb.UnpauseActivityRequest) (*activitypb.UnpauseActivityResponse, error) {
	client, err := c.activityClient(req.GetNamespaceId(), req.GetActivityId())
	if err != nil {
		return nil, err
	}
	return client.UnpauseActivity(ctx, req, resendableWith(req.GetRequestId())...)
}

func (c *routedHistoryClient) ResetActivity(ctx context.Context, req *activitypb.ResetActivityRequest) (*activitypb.ResetActivityResponse, error) {
	client, err := c.activityClient(req.GetNamespaceId(), req.GetActivityId())
	if err != nil {
		return nil, err
	}
	return client.ResetActivity(ctx, req, resendableWith(req.GetRequestId())...)
}

func (c *routedHistoryClient) UpdateActivityOptions(ctx context.Context, req *activitypb.UpdateActivityOptionsRequest) (*activitypb.UpdateActivityOptionsResponse, error) {
	client, err := c.activityClient(req.GetNamespaceId(), req.GetActivityId())
	if err != nil {
		return nil, err
	}
	return client.UpdateActivityOptions(ctx, req, resendableWith(req.GetRequestId())...)
}
