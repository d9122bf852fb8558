package reminder

import (
	"context"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm"
	testpb "github.com/vigilhq/vigil/chasm/chasmtest/gen/testpb/v1"
)

// Handler serves ReminderService on any engine: it is how host-level tests drive the
// reminder over gRPC.
type Handler struct {
	testpb.UnimplementedReminderServiceServer
	engine chasm.Engine
}

// NewHandler returns a handler running on engine.
func NewHandler(engine chasm.Engine) *Handler { return &Handler{engine: engine} }

// Schedule creates the reminder or re-arms it, in one atomic step.
func (h *Handler) Schedule(ctx context.Context, req *testpb.ScheduleRequest) (*testpb.ScheduleResponse, error) {
	if req.GetNamespaceId() == "" || req.GetReminderId() == "" {
		return nil, serviceerror.NewInvalidArgument("namespace_id and reminder_id are required")
	}
	if req.GetDelay().AsDuration() < 0 {
		return nil, serviceerror.NewInvalidArgument("delay must not be negative")
	}
	key := chasm.ExecutionKey{NamespaceID: req.GetNamespaceId(), BusinessID: req.GetReminderId()}
	fireCount, _, err := chasm.UpdateWithStart(ctx, h.engine, key,
		func(chasm.MutableContext) (*Reminder, error) {
			return &Reminder{ReminderState: &testpb.ReminderState{Destination: req.GetDestination()}}, nil
		},
		func(mctx chasm.MutableContext, r *Reminder) (int64, error) {
			err := TransitionScheduled.Apply(r, mctx, EventSchedule{Delay: req.GetDelay().AsDuration()})
			return r.FireCount, err
		})
	if err != nil {
		return nil, err
	}
	return &testpb.ScheduleResponse{FireCount: fireCount}, nil
}

// Describe returns the reminder's state.
func (h *Handler) Describe(ctx context.Context, req *testpb.DescribeRequest) (*testpb.DescribeResponse, error) {
	key := chasm.ExecutionKey{NamespaceID: req.GetNamespaceId(), BusinessID: req.GetReminderId()}
	ref, err := chasm.NewRef[*Reminder](h.engine, key)
	if err != nil {
		return nil, err
	}
	state, err := chasm.ReadComponent(ctx, h.engine, ref, func(_ chasm.Context, r *Reminder) (*testpb.ReminderState, error) {
		return proto.Clone(r.ReminderState).(*testpb.ReminderState), nil
	})
	if err != nil {
		return nil, err
	}
	return &testpb.DescribeResponse{State: state}, nil
}
