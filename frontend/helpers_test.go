package frontend

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/log"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend/namespace"
)

const testNamespace = "orders"

// testEnv is one test's setup: a mocked history whose shard of a worker is the number at the
// end of its instance key ("w-3" lives on shard 3).
type testEnv struct {
	history  *MockHistoryClient
	dc       *dynamicconfig.MemoryClient
	deps     Deps
	ns       *namespace.Namespace
	workflow *WorkflowHandler
	liveness *LivenessHandler
}

func newTestEnv(t *testing.T, opts ...WorkflowHandlerOption) *testEnv {
	t.Helper()
	ctrl := gomock.NewController(t)
	history := NewMockHistoryClient(ctrl)
	history.EXPECT().ShardFor(gomock.Any(), gomock.Any()).AnyTimes().DoAndReturn(func(_, key string) int32 {
		return shardOfKey(key)
	})
	registry := namespace.MustNewRegistry(namespace.Config{Name: testNamespace, Description: "test"})
	ns, err := registry.GetByName(testNamespace)
	require.NoError(t, err)
	logger := log.NewTestLogger(t)
	dc := dynamicconfig.NewMemoryClient()
	deps := Deps{
		History:       history,
		Namespaces:    registry,
		DynamicConfig: dynamicconfig.NewCollection(dc, logger),
		Logger:        logger,
	}
	return &testEnv{
		history:  history,
		dc:       dc,
		deps:     deps,
		ns:       ns,
		workflow: NewWorkflowHandler(deps, opts...),
		liveness: NewLivenessHandler(deps),
	}
}

func shardOfKey(key string) int32 {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '-' {
			n, err := strconv.Atoi(key[i+1:])
			if err == nil {
				return int32(n)
			}
			break
		}
	}
	return 1
}

func heartbeatOf(key string) *workerapipb.WorkerHeartbeat {
	return &workerapipb.WorkerHeartbeat{
		WorkerInstanceKey: key,
		WorkerIdentity:    "1@" + key,
		HostInfo:          &workerapipb.WorkerHostInfo{HostName: "host-a", WorkerGroupingKey: "g", ProcessId: "1"},
		TaskQueue:         "tq",
		SdkName:           "temporal-go",
		SdkVersion:        "1.50.0",
		Status:            enumspb.WORKER_STATUS_RUNNING,
		StartTime:         timestamppb.New(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
		HeartbeatTime:     timestamppb.New(time.Date(2025, 1, 1, 0, 1, 0, 0, time.UTC)),
	}
}

func record(key string, status workerpb.WorkerStatus, reported enumspb.WorkerStatus) *workerpb.WorkerRecord {
	hb := heartbeatOf(key)
	hb.Status = reported
	return &workerpb.WorkerRecord{
		WorkerInstanceKey: key,
		State: &workerpb.WorkerState{
			Status:            status,
			Namespace:         testNamespace,
			LastHeartbeat:     hb,
			LastHeartbeatTime: timestamppb.New(time.Date(2025, 1, 1, 0, 1, 0, 0, time.UTC)),
		},
	}
}

// pagedHistory answers ListWorkers from records like history does: pages of at most
// PageSize, an opaque token, optional status filter.
func pagedHistory(t *testing.T, records []*workerpb.WorkerRecord) func(context.Context, *workerpb.ListWorkersRequest) (*workerpb.ListWorkersResponse, error) {
	return func(_ context.Context, req *workerpb.ListWorkersRequest) (*workerpb.ListWorkersResponse, error) {
		require.Positive(t, req.GetPageSize(), "history must be asked for a positive page size")
		start := 0
		if len(req.GetNextPageToken()) > 0 {
			n, err := fmt.Sscanf(string(req.GetNextPageToken()), "offset:%d", &start)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}
		var matching []*workerpb.WorkerRecord
		for _, r := range records {
			if req.GetStatus() == workerpb.WorkerStatus_WORKER_STATUS_UNSPECIFIED || r.GetState().GetStatus() == req.GetStatus() {
				matching = append(matching, r)
			}
		}
		end := min(start+int(req.GetPageSize()), len(matching))
		resp := &workerpb.ListWorkersResponse{Workers: matching[start:end]}
		if end < len(matching) {
			resp.NextPageToken = fmt.Appendf(nil, "offset:%d", end)
		}
		return resp, nil
	}
}

func requireCode(t *testing.T, want codes.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, serviceerror.ToStatus(err).Code(), "error: %v", err)
}
