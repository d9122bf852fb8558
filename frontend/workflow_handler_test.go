package frontend

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

func TestGetSystemInfo(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	resp, err := env.workflow.GetSystemInfo(context.Background(), &workflowservice.GetSystemInfoRequest{})
	require.NoError(t, err)
	require.Equal(t, ServerVersion, resp.GetServerVersion())
	require.Equal(t, &workflowservice.GetSystemInfoResponse_Capabilities{
		InternalErrorDifferentiation:    true,
		ActivityFailureIncludeHeartbeat: true,
		EncodedFailureAttributes:        true,
	}, resp.GetCapabilities())
}

func TestDescribeNamespace(t *testing.T) {
	t.Parallel()

	t.Run("AdvertisesHeartbeatsCommandsAndPollCompletion", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		resp, err := env.workflow.DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Namespace: testNamespace})
		require.NoError(t, err)
		info := resp.GetNamespaceInfo()
		require.Equal(t, testNamespace, info.GetName())
		require.Equal(t, env.ns.ID, info.GetId())
		require.Equal(t, enumspb.NAMESPACE_STATE_REGISTERED, info.GetState())
		require.True(t, info.GetCapabilities().GetWorkerHeartbeats())
		require.True(t, info.GetCapabilities().GetWorkerCommands())
		require.True(t, info.GetCapabilities().GetWorkerPollCompleteOnShutdown(),
			"ShutdownWorker completes workflow and activity polls, so it is advertised by default")
		require.True(t, info.GetCapabilities().GetStandaloneActivities())
		require.True(t, info.GetCapabilities().GetStandaloneActivityStartDelay())
		require.True(t, info.GetCapabilities().GetStandaloneActivityOperatorCommands())
		require.False(t, info.GetCapabilities().GetStandaloneActivityBatchOperations(), "not served")
	})

	t.Run("PollCompletionCanBeWithdrawn", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t, WithoutPollCompleteOnShutdown())
		resp, err := env.workflow.DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Id: env.ns.ID})
		require.NoError(t, err)
		require.False(t, resp.GetNamespaceInfo().GetCapabilities().GetWorkerPollCompleteOnShutdown())
	})

	t.Run("UnknownIsNamespaceNotFound", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		_, err := env.workflow.DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Namespace: "nope"})
		var nf *serviceerror.NamespaceNotFound
		require.ErrorAs(t, err, &nf)
	})
}

func okResults(req *workerpb.RecordHeartbeatsRequest) *workerpb.RecordHeartbeatsResponse {
	resp := &workerpb.RecordHeartbeatsResponse{}
	for range req.GetHeartbeats() {
		resp.Results = append(resp.Results, &workerpb.HeartbeatResult{Status: workerpb.WorkerStatus_WORKER_STATUS_ACTIVE})
	}
	return resp
}

func TestRecordWorkerHeartbeat(t *testing.T) {
	t.Parallel()

	t.Run("GroupsByShardAndCallsShardsInParallel", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		// Five heartbeats on three shards; every shard call waits until all three have arrived,
		// which only happens if they run at the same time.
		keys := []string{"a-1", "b-2", "c-1", "d-3", "e-2"}
		var mu sync.Mutex
		seen := map[int32][]string{}
		arrived := make(chan struct{}, 3)
		allArrived := make(chan struct{})
		go func() {
			for range 3 {
				<-arrived
			}
			close(allArrived)
		}()
		env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).Times(3).DoAndReturn(
			func(ctx context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
				require.Equal(t, env.ns.ID, req.GetNamespaceId())
				require.Equal(t, testNamespace, req.GetNamespace())
				mu.Lock()
				for _, e := range req.GetHeartbeats() {
					require.Equal(t, req.GetShardId(), shardOfKey(e.GetHeartbeat().GetWorkerInstanceKey()))
					require.Nil(t, e.GetLeaseDuration(), "SDK heartbeats leave the lease to history")
					seen[req.GetShardId()] = append(seen[req.GetShardId()], e.GetHeartbeat().GetWorkerInstanceKey())
				}
				mu.Unlock()
				arrived <- struct{}{}
				select {
				case <-allArrived:
				case <-time.After(5 * time.Second):
					return nil, errors.New("shard calls were not made in parallel")
				}
				return okResults(req), nil
			})
		req := &workflowservice.RecordWorkerHeartbeatRequest{Namespace: testNamespace}
		for _, k := range keys {
			req.WorkerHeartbeat = append(req.WorkerHeartbeat, heartbeatOf(k))
		}
		_, err := env.workflow.RecordWorkerHeartbeat(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, map[int32][]string{1: {"a-1", "c-1"}, 2: {"b-2", "e-2"}, 3: {"d-3"}}, seen,
			"each shard gets its own heartbeats, in request order")
	})

	t.Run("PartialFailureFailsTheRequestWithTheMostActionableError", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).Times(3).DoAndReturn(
			func(_ context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
				switch req.GetShardId() {
				case 1:
					return okResults(req), nil
				case 2:
					resp := okResults(req)
					resp.Results[0].Error = &workerpb.EntryError{Code: int32(codes.FailedPrecondition), Message: "worker was cleaned up"}
					return resp, nil
				default:
					return nil, serviceerror.NewUnavailable("shard 3 is moving")
				}
			})
		req := &workflowservice.RecordWorkerHeartbeatRequest{Namespace: testNamespace, WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{
			heartbeatOf("a-1"), heartbeatOf("b-2"), heartbeatOf("c-3"),
		}}
		_, err := env.workflow.RecordWorkerHeartbeat(context.Background(), req)
		// Unavailable beats FailedPrecondition: the SDK retries it, and the retry renews c-3.
		requireCode(t, codes.Unavailable, err)
		require.ErrorContains(t, err, "2 of 3 heartbeats failed")
		require.ErrorContains(t, err, `"c-3"`)
	})

	t.Run("SingleEntryErrorKeepsItsCode", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).DoAndReturn(
			func(_ context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
				return &workerpb.RecordHeartbeatsResponse{Results: []*workerpb.HeartbeatResult{{
					Error: &workerpb.EntryError{Code: int32(codes.InvalidArgument), Message: "too many bindings"},
				}}}, nil
			})
		_, err := env.workflow.RecordWorkerHeartbeat(context.Background(), &workflowservice.RecordWorkerHeartbeatRequest{
			Namespace: testNamespace, WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{heartbeatOf("a-1")},
		})
		var invalid *serviceerror.InvalidArgument
		require.ErrorAs(t, err, &invalid)
		require.Equal(t, "too many bindings", invalid.Error())
	})

	t.Run("WrongResultCountIsInternal", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().RecordHeartbeats(gomock.Any(), gomock.Any()).Return(&workerpb.RecordHeartbeatsResponse{}, nil)
		_, err := env.workflow.RecordWorkerHeartbeat(context.Background(), &workflowservice.RecordWorkerHeartbeatRequest{
			Namespace: testNamespace, WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{heartbeatOf("a-1")},
		})
		requireCode(t, codes.Internal, err)
	})

	t.Run("UnknownNamespaceCallsNothing", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		_, err := env.workflow.RecordWorkerHeartbeat(context.Background(), &workflowservice.RecordWorkerHeartbeatRequest{
			Namespace: "nope", WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{heartbeatOf("a-1")},
		})
		requireCode(t, codes.NotFound, err)
	})
}

func TestDescribeWorkerDerivesStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		state    workerpb.WorkerStatus
		reported enumspb.WorkerStatus
		want     enumspb.WorkerStatus
	}{
		{"ActiveRunning", workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, enumspb.WORKER_STATUS_RUNNING, enumspb.WORKER_STATUS_RUNNING},
		{"ActiveShuttingDown", workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, enumspb.WORKER_STATUS_SHUTTING_DOWN, enumspb.WORKER_STATUS_SHUTTING_DOWN},
		{"ActiveUnreported", workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, enumspb.WORKER_STATUS_UNSPECIFIED, enumspb.WORKER_STATUS_RUNNING},
		{"ActiveClaimingShutdown", workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, enumspb.WORKER_STATUS_SHUTDOWN, enumspb.WORKER_STATUS_SHUTTING_DOWN},
		{"InactiveThatSaidRunning", workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, enumspb.WORKER_STATUS_RUNNING, enumspb.WORKER_STATUS_SHUTDOWN},
		{"InactiveAfterShutdown", workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, enumspb.WORKER_STATUS_SHUTTING_DOWN, enumspb.WORKER_STATUS_SHUTDOWN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t)
			stored := record("w-1", tc.state, tc.reported)
			env.history.EXPECT().DescribeWorker(gomock.Any(), gomock.Any()).Return(&workerpb.DescribeWorkerResponse{Worker: stored}, nil)
			resp, err := env.workflow.DescribeWorker(context.Background(), &workflowservice.DescribeWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
			require.NoError(t, err)
			require.Equal(t, tc.want, resp.GetWorkerInfo().GetWorkerHeartbeat().GetStatus())
			require.Equal(t, "w-1", resp.GetWorkerInfo().GetWorkerHeartbeat().GetWorkerInstanceKey())
			require.Equal(t, tc.reported, stored.GetState().GetLastHeartbeat().GetStatus(), "the stored record is not modified")
		})
	}

	t.Run("CleanedUpIsNotFound", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().DescribeWorker(gomock.Any(), &workerpb.DescribeWorkerRequest{NamespaceId: env.ns.ID, WorkerInstanceKey: "w-1"}).
			Return(&workerpb.DescribeWorkerResponse{Worker: record("w-1", workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, enumspb.WORKER_STATUS_RUNNING)}, nil)
		_, err := env.workflow.DescribeWorker(context.Background(), &workflowservice.DescribeWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		requireCode(t, codes.NotFound, err)
	})

	t.Run("HistoryNotFoundPassesThrough", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().DescribeWorker(gomock.Any(), gomock.Any()).Return(nil, serviceerror.NewNotFound("no such worker"))
		_, err := env.workflow.DescribeWorker(context.Background(), &workflowservice.DescribeWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		requireCode(t, codes.NotFound, err)
	})
}

// fleet is 25 workers: w-0..w-24, every fifth CLEANED_UP, every third INACTIVE, task queue
// "even"/"odd" by number.
func fleet() []*workerpb.WorkerRecord {
	var records []*workerpb.WorkerRecord
	for i := range 25 {
		status := workerpb.WorkerStatus_WORKER_STATUS_ACTIVE
		switch {
		case i%5 == 0:
			status = workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP
		case i%3 == 0:
			status = workerpb.WorkerStatus_WORKER_STATUS_INACTIVE
		}
		r := record("w-"+itoa(i), status, enumspb.WORKER_STATUS_RUNNING)
		if i%2 == 0 {
			r.State.LastHeartbeat.TaskQueue = "even"
		} else {
			r.State.LastHeartbeat.TaskQueue = "odd"
		}
		records = append(records, r)
	}
	return records
}

func itoa(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }

func TestListWorkers(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name     string
		query    string
		pageSize int32
		want     func(i int) bool
	}{
		{"EveryVisibleWorker", "", 4, func(i int) bool { return i%5 != 0 }},
		{"SelectiveQuery", `TaskQueue = "odd" AND Status = "Running"`, 3, func(i int) bool { return i%5 != 0 && i%3 != 0 && i%2 == 1 }},
		{"ShutdownMeansInactive", `Status = "Shutdown"`, 2, func(i int) bool { return i%5 != 0 && i%3 == 0 }},
		{"OnePage", "", 1000, func(i int) bool { return i%5 != 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t)
			env.history.EXPECT().ListWorkers(gomock.Any(), gomock.Any()).AnyTimes().DoAndReturn(pagedHistory(t, fleet()))
			var got []string
			var token []byte
			for pages := 0; ; pages++ {
				require.Less(t, pages, 100, "pagination does not end")
				resp, err := env.workflow.ListWorkers(context.Background(), &workflowservice.ListWorkersRequest{
					Namespace: testNamespace, PageSize: tc.pageSize, Query: tc.query, NextPageToken: token,
				})
				require.NoError(t, err)
				require.LessOrEqual(t, len(resp.GetWorkers()), int(tc.pageSize))
				//lint:ignore SA1019 the deprecated field must still be filled.
				require.Len(t, resp.GetWorkersInfo(), len(resp.GetWorkers()), "both fields are filled")
				for i, w := range resp.GetWorkers() {
					//lint:ignore SA1019 the deprecated field must still be filled.
					info := resp.GetWorkersInfo()[i].GetWorkerHeartbeat()
					require.Equal(t, info.GetWorkerInstanceKey(), w.GetWorkerInstanceKey())
					require.Equal(t, info.GetStatus(), w.GetStatus())
					require.Equal(t, info.GetHostInfo().GetHostName(), w.GetHostName())
					got = append(got, w.GetWorkerInstanceKey())
				}
				token = resp.GetNextPageToken()
				if len(token) == 0 {
					break
				}
			}
			var want []string
			for i := range 25 {
				if tc.want(i) {
					want = append(want, "w-"+itoa(i))
				}
			}
			sort.Strings(got)
			require.Equal(t, want, got, "each matching worker exactly once")
		})
	}

	t.Run("UnknownColumnIsInvalidArgument", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		_, err := env.workflow.ListWorkers(context.Background(), &workflowservice.ListWorkersRequest{Namespace: testNamespace, Query: `Colour = "red"`})
		requireCode(t, codes.InvalidArgument, err)
		require.ErrorContains(t, err, `unknown column "Colour"`)
	})

	t.Run("TokenOfAnotherQueryIsRejected", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().ListWorkers(gomock.Any(), gomock.Any()).AnyTimes().DoAndReturn(pagedHistory(t, fleet()))
		resp, err := env.workflow.ListWorkers(context.Background(), &workflowservice.ListWorkersRequest{Namespace: testNamespace, PageSize: 2})
		require.NoError(t, err)
		require.NotEmpty(t, resp.GetNextPageToken())
		_, err = env.workflow.ListWorkers(context.Background(), &workflowservice.ListWorkersRequest{
			Namespace: testNamespace, PageSize: 2, Query: `TaskQueue = "odd"`, NextPageToken: resp.GetNextPageToken(),
		})
		requireCode(t, codes.InvalidArgument, err)
		_, err = env.workflow.ListWorkers(context.Background(), &workflowservice.ListWorkersRequest{
			Namespace: testNamespace, NextPageToken: []byte("garbage"),
		})
		requireCode(t, codes.InvalidArgument, err)
	})
}

func TestCountWorkers(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.history.EXPECT().ListWorkers(gomock.Any(), gomock.Any()).AnyTimes().DoAndReturn(pagedHistory(t, fleet()))
	for query, want := range map[string]int64{
		"":                    20,
		`TaskQueue = "even"`:  10,
		`Status = "Shutdown"`: 7,
		`Status = "Running" OR Status = "ShuttingDown"`: 13,
	} {
		resp, err := env.workflow.CountWorkers(context.Background(), &workflowservice.CountWorkersRequest{Namespace: testNamespace, Query: query})
		require.NoError(t, err, query)
		require.Equal(t, want, resp.GetCount(), query)
	}
	_, err := env.workflow.CountWorkers(context.Background(), &workflowservice.CountWorkersRequest{Namespace: testNamespace, Query: `Nope = "x"`})
	requireCode(t, codes.InvalidArgument, err)
}

func TestShutdownWorker(t *testing.T) {
	t.Parallel()

	t.Run("CarriesTheSnapshot", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		hb := heartbeatOf("w-1")
		hb.Status = enumspb.WORKER_STATUS_SHUTTING_DOWN
		env.history.EXPECT().ShutdownWorker(gomock.Any(), &workerpb.ShutdownWorkerRequest{
			NamespaceId: env.ns.ID, Namespace: testNamespace, WorkerInstanceKey: "w-1", Heartbeat: hb, Reason: "graceful shutdown",
		}).Return(&workerpb.ShutdownWorkerResponse{RescheduledActivities: 2}, nil)
		_, err := env.workflow.ShutdownWorker(context.Background(), &workflowservice.ShutdownWorkerRequest{
			Namespace: testNamespace, WorkerInstanceKey: "w-1", WorkerHeartbeat: hb, Reason: "graceful shutdown",
		})
		require.NoError(t, err)
	})

	t.Run("UnknownWorkerIsSuccess", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().ShutdownWorker(gomock.Any(), gomock.Any()).Return(nil, serviceerror.NewNotFound("no such worker"))
		_, err := env.workflow.ShutdownWorker(context.Background(), &workflowservice.ShutdownWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		require.NoError(t, err)
	})

	t.Run("OtherErrorsPassThrough", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().ShutdownWorker(gomock.Any(), gomock.Any()).Return(nil, serviceerror.NewUnavailable("shard moving"))
		_, err := env.workflow.ShutdownWorker(context.Background(), &workflowservice.ShutdownWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		requireCode(t, codes.Unavailable, err)
	})

	t.Run("CompletesTheWorkersOpenPolls", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		env.history.EXPECT().ShutdownWorker(gomock.Any(), gomock.Any()).Return(&workerpb.ShutdownWorkerResponse{}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		polled := make(chan error, 2)
		for _, key := range []string{"w-1", "w-2"} {
			go func() {
				_, err := env.workflow.PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: testNamespace, WorkerInstanceKey: key})
				polled <- err
			}()
		}
		require.Eventually(t, func() bool { return env.workflow.polls.open("w-1") == 1 && env.workflow.polls.open("w-2") == 1 },
			5*time.Second, time.Millisecond)
		_, err := env.workflow.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		require.NoError(t, err)
		select {
		case err := <-polled:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("the shut-down worker's poll was not completed")
		}
		require.Equal(t, 1, env.workflow.polls.open("w-2"), "other workers' polls stay open")
		env.workflow.Stop()
		require.NoError(t, <-polled)
	})
}

func TestPollWorkflowTaskQueue(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsEmptyBeforeTheClientDeadline", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t, WithLongPollTimeout(time.Minute, 200*time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		defer cancel()
		start := time.Now()
		resp, err := env.workflow.PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: testNamespace, WorkerInstanceKey: "w-1"})
		require.NoError(t, err)
		require.Empty(t, resp.GetTaskToken())
		elapsed := time.Since(start)
		require.GreaterOrEqual(t, elapsed, 300*time.Millisecond, "it long-polls")
		require.NoError(t, ctx.Err(), "it answered before the deadline")
	})

	t.Run("HoldsAtMostTheLongPollTimeout", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t, WithLongPollTimeout(100*time.Millisecond, time.Second))
		resp, err := env.workflow.PollWorkflowTaskQueue(context.Background(), &workflowservice.PollWorkflowTaskQueueRequest{Namespace: testNamespace})
		require.NoError(t, err)
		require.Empty(t, resp.GetTaskToken())
	})

	t.Run("ReturnsEarlyWhenTheServerStops", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		done := make(chan error, 1)
		go func() {
			_, err := env.workflow.PollWorkflowTaskQueue(context.Background(), &workflowservice.PollWorkflowTaskQueueRequest{Namespace: testNamespace})
			done <- err
		}()
		env.workflow.Stop()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("poll did not end at Stop")
		}
	})

	t.Run("UnknownNamespaceIsUnavailableNeverNotFound", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		_, err := env.workflow.PollWorkflowTaskQueue(context.Background(), &workflowservice.PollWorkflowTaskQueueRequest{Namespace: "nope"})
		requireCode(t, codes.Unavailable, err)
	})

	t.Run("ClientCancelIsCanceled", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := env.workflow.PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: testNamespace})
		requireCode(t, codes.Canceled, err)
	})
}
