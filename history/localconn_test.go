package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	workerapipb "go.temporal.io/api/worker/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm"
	testpb "github.com/vigilhq/vigil/chasm/chasmtest/gen/testpb/v1"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/history/historytest"
)

func TestLocalConnBehavesLikeTheWire(t *testing.T) {
	t.Parallel()
	h := historytest.Start(t, historytest.Options{Libraries: []chasm.Library{reminder.NewLibrary(reminder.NewRecordingSink())}})
	local := history.NewLocalConn()
	testpb.RegisterReminderServiceServer(local, reminder.NewHandler(h.Engine))
	router := history.NewRouter(h.Engine.NumShards(), history.StaticMembership{Address: "self"},
		history.WithLocalConn(local, func() string { return "self" }))
	conn, err := router.ConnFor(testNamespace, "r1")
	require.NoError(t, err)
	// A shard of this process is served in process: "self" is no address a dial could reach.
	client := testpb.NewReminderServiceClient(conn)
	ctx := context.Background()

	req := &testpb.ScheduleRequest{NamespaceId: testNamespace, ReminderId: "r1", Delay: durationpb.New(time.Hour)}
	_, err = client.Schedule(ctx, req)
	require.NoError(t, err)

	resp, err := client.Describe(ctx, &testpb.DescribeRequest{NamespaceId: testNamespace, ReminderId: "r1"})
	require.NoError(t, err)
	require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_SCHEDULED, resp.State.Status)
	resp.State.Status = testpb.ReminderStatus_REMINDER_STATUS_CANCELED // the reply is the caller's own copy
	again, err := client.Describe(ctx, &testpb.DescribeRequest{NamespaceId: testNamespace, ReminderId: "r1"})
	require.NoError(t, err)
	require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_SCHEDULED, again.State.Status)

	_, err = client.Schedule(ctx, &testpb.ScheduleRequest{NamespaceId: testNamespace})
	var invalid *serviceerror.InvalidArgument
	require.ErrorAs(t, err, &invalid, "errors keep their type, as after a trip through a status")

	_, err = workerpb.NewWorkerHistoryServiceClient(conn).DrainWorker(ctx, &workerpb.DrainWorkerRequest{})
	var unimplemented *serviceerror.Unimplemented
	require.ErrorAs(t, err, &unimplemented)
}

// heartbeatsByReference is a worker history service that keeps what its RecordHeartbeats saw.
type heartbeatsByReference struct {
	workerpb.UnimplementedWorkerHistoryServiceServer
	seen  *workerpb.RecordHeartbeatsRequest
	reply *workerpb.RecordHeartbeatsResponse
}

func (s *heartbeatsByReference) RecordHeartbeats(_ context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
	s.seen = req
	return s.reply, nil
}

func TestLocalConnHandsOverMessagesByReferenceOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	svc := &heartbeatsByReference{reply: &workerpb.RecordHeartbeatsResponse{Results: []*workerpb.HeartbeatResult{{ConflictToken: 7}}}}
	local := history.NewLocalConn()
	workerpb.RegisterWorkerHistoryServiceServer(local, svc)
	client := workerpb.NewWorkerHistoryServiceClient(local)
	entry := &workerpb.HeartbeatEntry{Heartbeat: &workerapipb.WorkerHeartbeat{WorkerInstanceKey: "w1"}}
	req := &workerpb.RecordHeartbeatsRequest{NamespaceId: "ns-id", Namespace: "ns", ShardId: 3, Heartbeats: []*workerpb.HeartbeatEntry{entry}}

	resp, err := client.RecordHeartbeats(context.Background(), req, chasm.ByReference)
	require.NoError(t, err)
	require.True(t, proto.Equal(req, svc.seen), "the handler sees every field")
	require.Same(t, entry, svc.seen.Heartbeats[0], "the entries are the caller's own, not copies")
	require.Same(t, svc.reply.Results[0], resp.Results[0], "the results are the handler's own")

	resp, err = client.RecordHeartbeats(context.Background(), req)
	require.NoError(t, err)
	require.True(t, proto.Equal(req, svc.seen))
	require.NotSame(t, entry, svc.seen.Heartbeats[0], "without the option the handler gets a copy")
	require.NotSame(t, svc.reply.Results[0], resp.Results[0], "and the caller a copy of the reply")
	require.True(t, proto.Equal(svc.reply, resp))
}
