package frontend

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

func TestRecordHeartbeat(t *testing.T) {
	t.Parallel()

	t.Run("PassesTheExtendedFieldsAndReturnsTheLease", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		deadline := timestamppb.New(time.Date(2025, 1, 1, 0, 0, 30, 0, time.UTC))
		env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).DoAndReturn(
			func(_ context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
				require.Equal(t, int32(7), req.GetShardId())
				require.Len(t, req.GetHeartbeats(), 1)
				e := req.GetHeartbeats()[0]
				require.Equal(t, 20*time.Second, e.GetLeaseDuration().AsDuration())
				require.Equal(t, int64(4), e.GetConflictToken())
				require.True(t, proto.Equal(&workerpb.ActivityBinding{ActivityId: "a1", RunId: "r1", Stamp: 2}, e.GetBound()[0]))
				require.True(t, proto.Equal(&workerpb.ActivityBinding{ActivityId: "a0", RunId: "r0", Stamp: 1}, e.GetUnbound()[0]))
				return &workerpb.RecordHeartbeatsResponse{Results: []*workerpb.HeartbeatResult{{
					LeaseDeadline: deadline, ConflictToken: 5, ShouldDrain: true, Resurrected: true,
				}}}, nil
			})
		resp, err := env.liveness.RecordHeartbeat(context.Background(), &livenesspb.RecordHeartbeatRequest{
			Namespace:         testNamespace,
			WorkerHeartbeat:   heartbeatOf("w-7"),
			LeaseDuration:     durationpb.New(20 * time.Second),
			BoundActivities:   []*livenesspb.ActivityBinding{{ActivityId: "a1", RunId: "r1", Stamp: 2}},
			UnboundActivities: []*livenesspb.ActivityBinding{{ActivityId: "a0", RunId: "r0", Stamp: 1}},
			ConflictToken:     proto.Int64(4),
		})
		require.NoError(t, err)
		require.True(t, proto.Equal(&livenesspb.RecordHeartbeatResponse{
			LeaseDeadline: deadline, ConflictToken: 5, ShouldDrain: true, Resurrected: true,
		}, resp))
	})

	t.Run("StaleTokenIsFailedPreconditionWithTheCurrentToken", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).Return(&workerpb.RecordHeartbeatsResponse{
			Results: []*workerpb.HeartbeatResult{{Error: &workerpb.EntryError{
				Code: int32(codes.FailedPrecondition), Message: "conflict token 4 is stale", CurrentConflictToken: 9, ConflictTokenMismatch: true,
			}}},
		}, nil)
		_, err := env.liveness.RecordHeartbeat(context.Background(), &livenesspb.RecordHeartbeatRequest{
			Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-1"), ConflictToken: proto.Int64(4),
		})
		var mismatch *ConflictTokenMismatchError
		require.ErrorAs(t, err, &mismatch)
		require.Equal(t, int64(9), mismatch.CurrentConflictToken)

		// What the client receives: the detail survives serviceerror.ToStatus.
		st := serviceerror.ToStatus(err)
		require.Equal(t, codes.FailedPrecondition, st.Code())
		require.Len(t, st.Details(), 1)
		detail, ok := st.Details()[0].(*livenesspb.ConflictTokenMismatch)
		require.True(t, ok, "detail is %T", st.Details()[0])
		require.Equal(t, int64(9), detail.GetCurrentConflictToken())
	})

	t.Run("CleanedUpWorkerIsNotAMismatch", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).Return(&workerpb.RecordHeartbeatsResponse{
			Results: []*workerpb.HeartbeatResult{{Error: &workerpb.EntryError{Code: int32(codes.FailedPrecondition), Message: "worker was cleaned up"}}},
		}, nil)
		_, err := env.liveness.RecordHeartbeat(context.Background(), &livenesspb.RecordHeartbeatRequest{
			Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-1"), ConflictToken: proto.Int64(12),
		})
		var mismatch *ConflictTokenMismatchError
		require.False(t, errors.As(err, &mismatch))
		var fp *serviceerror.FailedPrecondition
		require.ErrorAs(t, err, &fp)
		require.Empty(t, serviceerror.ToStatus(err).Details())
	})

	t.Run("FailedPreconditionWithoutTokenIsNotAMismatch", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).Return(&workerpb.RecordHeartbeatsResponse{
			Results: []*workerpb.HeartbeatResult{{Error: &workerpb.EntryError{Code: int32(codes.FailedPrecondition), Message: "cleaned up"}}},
		}, nil)
		_, err := env.liveness.RecordHeartbeat(context.Background(), &livenesspb.RecordHeartbeatRequest{
			Namespace: testNamespace, WorkerHeartbeat: heartbeatOf("w-1"),
		})
		var fp *serviceerror.FailedPrecondition
		require.ErrorAs(t, err, &fp)
	})
}

func TestDescribeWorkerLiveness(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	stored := record("w-1", workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, enumspb.WORKER_STATUS_RUNNING)
	stored.State.InactiveReason = workerpb.InactiveReason_INACTIVE_REASON_LEASE_EXPIRED
	stored.State.ResurrectionCount = 3
	stored.State.CleanupTime = timestamppb.New(time.Date(2025, 1, 1, 1, 0, 0, 0, time.UTC))
	stored.BoundActivities = []*workerpb.BoundActivity{{ActivityId: "a1", RunId: "r1", Stamp: 3}}
	env.history.EXPECT().DescribeWorker(gomock.Any(), &workerpb.DescribeWorkerRequest{
		NamespaceId: env.ns.ID, WorkerInstanceKey: "w-1", IncludeBoundActivities: true,
	}).Return(&workerpb.DescribeWorkerResponse{Worker: stored}, nil)
	resp, err := env.liveness.DescribeWorkerLiveness(context.Background(), &livenesspb.DescribeWorkerLivenessRequest{
		Namespace: testNamespace, WorkerInstanceKey: "w-1", IncludeBoundActivities: true,
	})
	require.NoError(t, err)
	w := resp.GetWorker()
	require.Equal(t, livenesspb.LivenessState_LIVENESS_STATE_CLEANED_UP, w.GetState(), "the extended API shows CLEANED_UP workers")
	require.Equal(t, livenesspb.InactiveReason_INACTIVE_REASON_LEASE_EXPIRED, w.GetInactiveReason())
	require.Equal(t, int64(3), w.GetResurrectionCount())
	require.Equal(t, stored.State.CleanupTime.AsTime(), w.GetCleanupTime().AsTime())
	require.Equal(t, enumspb.WORKER_STATUS_RUNNING, w.GetLastHeartbeat().GetStatus(), "the heartbeat as sent")
	require.Len(t, w.GetBoundActivities(), 1)
	require.Equal(t, "a1", w.GetBoundActivities()[0].GetActivityId())
}

func TestListWorkerLiveness(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.history.EXPECT().ListWorkers(gomock.Any(), gomock.Any()).AnyTimes().DoAndReturn(pagedHistory(t, fleet()))
	count := func(state livenesspb.LivenessState) int {
		var n int
		var token []byte
		for {
			resp, err := env.liveness.ListWorkerLiveness(context.Background(), &livenesspb.ListWorkerLivenessRequest{
				Namespace: testNamespace, State: state, PageSize: 4, NextPageToken: token,
			})
			require.NoError(t, err)
			for _, w := range resp.GetWorkers() {
				if state != livenesspb.LivenessState_LIVENESS_STATE_UNSPECIFIED {
					require.Equal(t, state, w.GetState())
				}
			}
			n += len(resp.GetWorkers())
			if token = resp.GetNextPageToken(); len(token) == 0 {
				return n
			}
		}
	}
	require.Equal(t, 25, count(livenesspb.LivenessState_LIVENESS_STATE_UNSPECIFIED))
	require.Equal(t, 5, count(livenesspb.LivenessState_LIVENESS_STATE_CLEANED_UP))
	require.Equal(t, 7, count(livenesspb.LivenessState_LIVENESS_STATE_INACTIVE))
	require.Equal(t, 13, count(livenesspb.LivenessState_LIVENESS_STATE_ACTIVE))
}

func TestDrainWorker(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.history.EXPECT().DrainWorker(gomock.Any(), &workerpb.DrainWorkerRequest{NamespaceId: env.ns.ID, WorkerInstanceKey: "w-1"}).
		Return(&workerpb.DrainWorkerResponse{}, nil)
	_, err := env.liveness.DrainWorker(context.Background(), &livenesspb.DrainWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
	require.NoError(t, err)
}

func TestListHosts(t *testing.T) {
	t.Parallel()
	hostRecord := func(key, host string, status workerpb.WorkerStatus, lastSeen time.Time) *workerpb.WorkerRecord {
		r := record(key, status, enumspb.WORKER_STATUS_RUNNING)
		r.State.LastHeartbeat.HostInfo.HostName = host
		r.State.LastHeartbeatTime = timestamppb.New(lastSeen)
		return r
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	records := []*workerpb.WorkerRecord{
		// host-a: one crashed worker, one live one: online.
		hostRecord("a1-1", "host-a", workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, t0.Add(3*time.Minute)),
		hostRecord("a2-1", "host-a", workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, t0.Add(time.Minute)),
		// host-b: every worker gone quiet: offline.
		hostRecord("b1-1", "host-b", workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, t0),
		hostRecord("b2-1", "host-b", workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, t0.Add(time.Second)),
		// host-c: only a cleaned-up worker: forgotten.
		hostRecord("c1-1", "host-c", workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, t0),
		hostRecord("d1-1", "host-d", workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, t0),
	}
	env := newTestEnv(t)
	env.history.EXPECT().ListWorkers(gomock.Any(), gomock.Any()).AnyTimes().DoAndReturn(pagedHistory(t, records))

	var hosts []*livenesspb.HostLiveness
	var token []byte
	for {
		resp, err := env.liveness.ListHosts(context.Background(), &livenesspb.ListHostsRequest{Namespace: testNamespace, PageSize: 2, NextPageToken: token})
		require.NoError(t, err)
		hosts = append(hosts, resp.GetHosts()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	var summary []string
	for _, h := range hosts {
		summary = append(summary, fmt.Sprintf("%s online=%t active=%d inactive=%d last=%s",
			h.GetHostName(), h.GetOnline(), h.GetActiveWorkers(), h.GetInactiveWorkers(), h.GetLastHeartbeatTime().AsTime().Format(time.TimeOnly)))
	}
	require.Equal(t, []string{
		"host-a online=true active=1 inactive=1 last=00:03:00",
		"host-b online=false active=0 inactive=2 last=00:00:01",
		"host-d online=true active=1 inactive=0 last=00:00:00",
	}, summary)
}
