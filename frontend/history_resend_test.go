package frontend

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// resendRecorder is a history connection that answers every call empty and records, by
// method, whether the call was marked chasm.Resendable.
type resendRecorder struct{ resendable map[string]bool }

func (r *resendRecorder) Invoke(_ context.Context, method string, _, _ any, opts ...grpc.CallOption) error {
	r.resendable[method[len("/"):]] = slices.Contains(opts, chasm.Resendable)
	return nil
}

func (r *resendRecorder) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	panic("no streams")
}

type recorderRouter struct{ conn *resendRecorder }

func (recorderRouter) ShardFor(string, string) int32 { return 1 }
func (r recorderRouter) ConnForShard(int32) (grpc.ClientConnInterface, error) {
	return r.conn, nil
}

// A call the history may deliver twice when its shard's owner stops answering is one whose
// second delivery does what the first did: heartbeats, reads, and calls carrying the request
// ID their handler deduplicates. An attempt's completion and a termination are not: their
// first delivery may have committed.
func TestHistoryClientMarksOnlyRepeatableCallsResendable(t *testing.T) {
	rec := &resendRecorder{resendable: map[string]bool{}}
	c := NewHistoryClient(recorderRouter{conn: rec})
	ctx := context.Background()
	token, err := activity.EncodeTaskToken(&activitypb.TaskToken{NamespaceId: "ns", ActivityId: "a", RunId: "r", Stamp: 1})
	require.NoError(t, err)

	_, err = c.RecordHeartbeats(ctx, &workerpb.RecordHeartbeatsRequest{ShardId: 1})
	require.NoError(t, err)
	_, err = c.DescribeWorker(ctx, &workerpb.DescribeWorkerRequest{})
	require.NoError(t, err)
	_, err = c.RecordActivityTaskHeartbeat(ctx, &activitypb.RecordActivityTaskHeartbeatRequest{NamespaceId: "ns", TaskToken: token})
	require.NoError(t, err)
	_, err = c.RespondActivityTaskCompleted(ctx, &activitypb.RespondActivityTaskCompletedRequest{NamespaceId: "ns", TaskToken: token})
	require.NoError(t, err)
	_, err = c.TerminateActivity(ctx, &activitypb.TerminateActivityRequest{})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{
		"vigil.worker.v1.WorkerHistoryService/RecordHeartbeats":                 true,
		"vigil.worker.v1.WorkerHistoryService/DescribeWorker":                   true,
		"vigil.activity.v1.ActivityHistoryService/RecordActivityTaskHeartbeat":  true,
		"vigil.activity.v1.ActivityHistoryService/RespondActivityTaskCompleted": false,
		"vigil.activity.v1.ActivityHistoryService/TerminateActivity":            false,
	}, rec.resendable)

	start := "vigil.activity.v1.ActivityHistoryService/StartActivity"
	_, err = c.StartActivity(ctx, &activitypb.StartActivityRequest{RequestId: "req-1"})
	require.NoError(t, err)
	require.True(t, rec.resendable[start], "a start with a request ID is deduplicated")
	_, err = c.StartActivity(ctx, &activitypb.StartActivityRequest{})
	require.NoError(t, err)
	require.False(t, rec.resendable[start], "a start without one is not")
}
