package tests

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workerpb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/tests/testcluster"
)

// BenchmarkRecordWorkerHeartbeat is the whole per-call path of an SDK heartbeat in one
// process: the gRPC client and server over loopback, the frontend's interceptors and
// validation, history and the worker component, on SQLite. One op is one heartbeat of one of
// 2,000 known workers (the SDK's snapshot: host, slots, pollers), sent from 64 goroutines over
// 4 connections as bench/cost.sh offers them, but as fast as they are answered. The client's
// own work is in the figures too, so compare builds with benchstat rather than read the ns/op
// as the server's cost (`vigil bench --server-pid` measures that):
//
//	go test -run '^$' -bench BenchmarkRecordWorkerHeartbeat -benchmem -count 10 ./tests/
func BenchmarkRecordWorkerHeartbeat(b *testing.B) {
	const workers, connections, callers = 2000, 4, 64
	cluster := testcluster.New(b, testcluster.Options{})
	clients := make([]workflowservice.WorkflowServiceClient, connections)
	for i := range clients {
		conn, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(b, err)
		b.Cleanup(func() { _ = conn.Close() })
		clients[i] = workflowservice.NewWorkflowServiceClient(conn)
	}
	started := timestamppb.Now()
	send := func(c workflowservice.WorkflowServiceClient, worker int) error {
		_, err := c.RecordWorkerHeartbeat(context.Background(), &workflowservice.RecordWorkerHeartbeatRequest{
			Namespace: "default", Identity: fmt.Sprintf("%d@bench-host", worker%100),
			WorkerHeartbeat: []*workerpb.WorkerHeartbeat{{
				WorkerInstanceKey: fmt.Sprintf("bench-worker-%04d", worker),
				WorkerIdentity:    fmt.Sprintf("%d@bench-host", worker%100),
				HostInfo:          &workerpb.WorkerHostInfo{HostName: "bench-host", WorkerGroupingKey: "group", ProcessId: "100"},
				TaskQueue:         "orders",
				SdkName:           "temporal-go",
				SdkVersion:        "1.51.0",
				Status:            enumspb.WORKER_STATUS_RUNNING,
				StartTime:         started,
				HeartbeatTime:     timestamppb.Now(),
				ActivityTaskSlotsInfo: &workerpb.WorkerSlotsInfo{
					CurrentAvailableSlots: 990, CurrentUsedSlots: 10, SlotSupplierKind: "Fixed"},
				WorkflowTaskSlotsInfo:     &workerpb.WorkerSlotsInfo{CurrentAvailableSlots: 1000, SlotSupplierKind: "Fixed"},
				ActivityPollerInfo:        &workerpb.WorkerPollerInfo{CurrentPollers: 2},
				WorkflowPollerInfo:        &workerpb.WorkerPollerInfo{CurrentPollers: 2},
				ElapsedSinceLastHeartbeat: durationpb.New(time.Minute), // a 3 min lease: none runs out
			}},
		})
		return err
	}
	// Every worker registers first: the benchmark times the renewals of known workers.
	var registered errgroup.Group
	registered.SetLimit(callers)
	for w := range workers {
		registered.Go(func() error { return send(clients[w%connections], w) })
	}
	require.NoError(b, registered.Wait())

	var next atomic.Int64
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((callers + procs - 1) / procs) // RunParallel runs parallelism × GOMAXPROCS goroutines
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := int(next.Add(1))
			if err := send(clients[n%connections], n%workers); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
