package matching

import (
	"context"
	"errors"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	matchingpb "github.com/vigilhq/vigil/matching/gen/matchingpb/v1"
)

// Service serves a Matcher over gRPC (MatchingService), on the host's history server: the
// receiving end of Client's forwarded calls. A call for a queue the matcher does not own is
// answered not_owner, never an error, so that the caller can tell "ask the new owner" from a
// failure.
type Service struct {
	matchingpb.UnimplementedMatchingServiceServer
	m *Matcher
}

// NewService returns the MatchingService of m.
func NewService(m *Matcher) *Service { return &Service{m: m} }

var _ matchingpb.MatchingServiceServer = (*Service)(nil)

// AddActivityTask implements matchingpb.MatchingServiceServer.
func (s *Service) AddActivityTask(_ context.Context, req *matchingpb.AddActivityTaskRequest) (*matchingpb.AddActivityTaskResponse, error) {
	err := s.m.AddActivityTask(refFromProto(req.GetTask()))
	if errors.Is(err, ErrNotOwner) {
		return &matchingpb.AddActivityTaskResponse{NotOwner: true}, nil
	}
	if err != nil {
		return nil, toServiceError(err)
	}
	return &matchingpb.AddActivityTaskResponse{}, nil
}

// ReturnActivityTask implements matchingpb.MatchingServiceServer.
func (s *Service) ReturnActivityTask(_ context.Context, req *matchingpb.ReturnActivityTaskRequest) (*matchingpb.ReturnActivityTaskResponse, error) {
	err := s.m.ReturnActivityTask(refFromProto(req.GetTask()))
	if errors.Is(err, ErrNotOwner) {
		return &matchingpb.ReturnActivityTaskResponse{NotOwner: true}, nil
	}
	if err != nil {
		return nil, toServiceError(err)
	}
	return &matchingpb.ReturnActivityTaskResponse{}, nil
}

// PollActivityTask implements matchingpb.MatchingServiceServer. The caller's deadline arrives
// with the call, so the poll answers PollDeadlineMargin before it as a local poll would.
func (s *Service) PollActivityTask(ctx context.Context, req *matchingpb.PollActivityTaskRequest) (*matchingpb.PollActivityTaskResponse, error) {
	ref, ok, err := s.m.PollActivityTask(ctx, ActivityPoll{
		NamespaceID: req.GetNamespaceId(), TaskQueue: req.GetTaskQueue(),
		Identity: req.GetIdentity(), WorkerInstanceKey: req.GetWorkerInstanceKey(),
		RatePerSecond: req.GetRatePerSecond(),
	})
	switch {
	case errors.Is(err, ErrNotOwner):
		return &matchingpb.PollActivityTaskResponse{NotOwner: true}, nil
	case err != nil:
		return nil, toServiceError(err)
	case !ok:
		return &matchingpb.PollActivityTaskResponse{}, nil
	}
	return &matchingpb.PollActivityTaskResponse{Task: refToProto(ref)}, nil
}

// CompletePollsOfWorker implements matchingpb.MatchingServiceServer.
func (s *Service) CompletePollsOfWorker(_ context.Context, req *matchingpb.CompletePollsOfWorkerRequest) (*matchingpb.CompletePollsOfWorkerResponse, error) {
	n := s.m.CompletePollsOfWorker(req.GetNamespaceId(), req.GetWorkerInstanceKey())
	return &matchingpb.CompletePollsOfWorkerResponse{Completed: int32(n)}, nil
}

// AddWorkerCommand implements matchingpb.MatchingServiceServer.
func (s *Service) AddWorkerCommand(_ context.Context, req *matchingpb.AddWorkerCommandRequest) (*matchingpb.AddWorkerCommandResponse, error) {
	err := s.m.AddWorkerCommand(req.GetNamespaceId(), req.GetControlQueue(), commandFromProto(req.GetCommand()))
	if errors.Is(err, ErrNotOwner) {
		return &matchingpb.AddWorkerCommandResponse{NotOwner: true}, nil
	}
	if err != nil {
		return nil, toServiceError(err)
	}
	return &matchingpb.AddWorkerCommandResponse{}, nil
}

// PollWorkerCommand implements matchingpb.MatchingServiceServer.
func (s *Service) PollWorkerCommand(ctx context.Context, req *matchingpb.PollWorkerCommandRequest) (*matchingpb.PollWorkerCommandResponse, error) {
	cmd, ok, err := s.m.PollWorkerCommand(ctx, req.GetNamespaceId(), req.GetControlQueue())
	switch {
	case errors.Is(err, ErrNotOwner):
		return &matchingpb.PollWorkerCommandResponse{NotOwner: true}, nil
	case err != nil:
		return nil, toServiceError(err)
	case !ok:
		return &matchingpb.PollWorkerCommandResponse{}, nil
	}
	return &matchingpb.PollWorkerCommandResponse{Command: commandToProto(cmd)}, nil
}

// AckWorkerCommand implements matchingpb.MatchingServiceServer.
func (s *Service) AckWorkerCommand(_ context.Context, req *matchingpb.AckWorkerCommandRequest) (*matchingpb.AckWorkerCommandResponse, error) {
	if s.m.AckWorkerCommand(req.GetNamespaceId(), req.GetControlQueue(), req.GetCommandId()) {
		return &matchingpb.AckWorkerCommandResponse{Acked: true}, nil
	}
	return &matchingpb.AckWorkerCommandResponse{NotOwner: !s.m.Owns(req.GetNamespaceId(), req.GetControlQueue())}, nil
}

// HandOver implements matchingpb.MatchingServiceServer: it queues what it owns of a previous
// owner's tasks and commands, and sends back what it does not own (its view of the members may
// lag the sender's). Other refusals (a full queue) drop the item: history re-queues every
// dispatched activity after a membership change, and worker commands are best effort.
func (s *Service) HandOver(_ context.Context, req *matchingpb.HandOverRequest) (*matchingpb.HandOverResponse, error) {
	var resp matchingpb.HandOverResponse
	for _, t := range req.GetTasks() {
		switch err := s.m.AddActivityTask(refFromProto(t)); {
		case err == nil:
			resp.TasksAccepted++
		case errors.Is(err, ErrNotOwner):
			resp.NotOwnedTasks = append(resp.NotOwnedTasks, t)
		}
	}
	for _, c := range req.GetCommands() {
		switch err := s.m.AddWorkerCommand(c.GetNamespaceId(), c.GetControlQueue(), commandFromProto(c.GetCommand())); {
		case err == nil:
			resp.CommandsAccepted++
		case errors.Is(err, ErrNotOwner):
			resp.NotOwnedCommands = append(resp.NotOwnedCommands, c)
		}
	}
	return &resp, nil
}

// DescribeActivityQueue implements matchingpb.MatchingServiceServer.
func (s *Service) DescribeActivityQueue(ctx context.Context, req *matchingpb.DescribeActivityQueueRequest) (*matchingpb.DescribeActivityQueueResponse, error) {
	d, err := s.m.DescribeActivityQueue(ctx, req.GetNamespaceId(), req.GetTaskQueue())
	switch {
	case errors.Is(err, ErrNotOwner):
		return &matchingpb.DescribeActivityQueueResponse{NotOwner: true}, nil
	case err != nil:
		return nil, toServiceError(err)
	}
	return descriptionToProto(d), nil
}

func descriptionToProto(d QueueDescription) *matchingpb.DescribeActivityQueueResponse {
	out := &matchingpb.DescribeActivityQueueResponse{
		BacklogCount: d.BacklogCount, BacklogAge: durationpb.New(d.BacklogAge),
		TasksAddRate: d.TasksAddRate, TasksDispatchRate: d.TasksDispatchRate,
	}
	for _, p := range d.Pollers {
		out.Pollers = append(out.Pollers, &matchingpb.Poller{
			Identity: p.Identity, WorkerInstanceKey: p.WorkerInstanceKey,
			LastAccessTime: timestamppb.New(p.LastAccessTime), RatePerSecond: p.RatePerSecond,
		})
	}
	return out
}

func descriptionFromProto(r *matchingpb.DescribeActivityQueueResponse) QueueDescription {
	d := QueueDescription{
		BacklogCount: r.GetBacklogCount(), BacklogAge: r.GetBacklogAge().AsDuration(),
		TasksAddRate: r.GetTasksAddRate(), TasksDispatchRate: r.GetTasksDispatchRate(),
	}
	for _, p := range r.GetPollers() {
		d.Pollers = append(d.Pollers, Poller{
			Identity: p.GetIdentity(), WorkerInstanceKey: p.GetWorkerInstanceKey(),
			LastAccessTime: p.GetLastAccessTime().AsTime(), RatePerSecond: p.GetRatePerSecond(),
		})
	}
	return d
}

// toServiceError gives a matcher error the status code a caller acts on, as a gRPC status
// (whatever interceptors the server has). Client turns the codes back into the same errors.
func toServiceError(err error) error {
	return serviceerror.ToStatus(matcherServiceError(err)).Err()
}

func matcherServiceError(err error) error {
	switch {
	case errors.Is(err, ErrBacklogFull):
		return serviceerror.NewResourceExhausted(0, err.Error())
	case errors.Is(err, ErrInvalidArgument):
		return serviceerror.NewInvalidArgument(err.Error())
	case errors.Is(err, ErrStopped):
		return serviceerror.NewUnavailable(err.Error())
	case errors.Is(err, context.Canceled):
		return serviceerror.NewCanceled(err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return serviceerror.NewDeadlineExceeded(err.Error())
	}
	return serviceerror.NewInternal(err.Error())
}

func refToProto(r ActivityTaskRef) *matchingpb.ActivityTaskRef {
	out := &matchingpb.ActivityTaskRef{
		NamespaceId: r.NamespaceID, TaskQueue: r.TaskQueue, ActivityId: r.ActivityID, RunId: r.RunID, Stamp: r.Stamp,
	}
	if !r.ScheduledTime.IsZero() {
		out.ScheduledTime = timestamppb.New(r.ScheduledTime)
	}
	return out
}

func refFromProto(r *matchingpb.ActivityTaskRef) ActivityTaskRef {
	out := ActivityTaskRef{
		NamespaceID: r.GetNamespaceId(), TaskQueue: r.GetTaskQueue(), ActivityID: r.GetActivityId(), RunID: r.GetRunId(), Stamp: r.GetStamp(),
	}
	if r.GetScheduledTime() != nil {
		out.ScheduledTime = r.GetScheduledTime().AsTime()
	}
	return out
}

func commandToProto(c WorkerCommand) *matchingpb.WorkerCommand {
	return &matchingpb.WorkerCommand{Id: c.ID, Payload: c.Payload}
}

func commandFromProto(c *matchingpb.WorkerCommand) WorkerCommand {
	return WorkerCommand{ID: c.GetId(), Payload: c.GetPayload()}
}
