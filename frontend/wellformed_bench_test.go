package frontend

import (
	"testing"
	"time"

	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BenchmarkWellFormedHeartbeat measures the check every RecordWorkerHeartbeat pays: one SDK
// worker's heartbeat with its slot and host info filled in, as the Go SDK sends it.
func BenchmarkWellFormedHeartbeat(b *testing.B) {
	now := timestamppb.New(time.Now())
	slots := &workerapipb.WorkerSlotsInfo{CurrentAvailableSlots: 99, CurrentUsedSlots: 1, SlotSupplierKind: "Fixed"}
	req := &workflowservice.RecordWorkerHeartbeatRequest{
		Namespace: "default", Identity: "123@host-a",
		WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{{
			WorkerInstanceKey: "1b4e28ba-2fa1-11d2-883f-0016d3cca427", WorkerIdentity: "123@host-a",
			HostInfo:  &workerapipb.WorkerHostInfo{HostName: "host-a", ProcessId: "123", CurrentHostCpuUsage: 0.2, CurrentHostMemUsage: 0.4},
			TaskQueue: "orders", SdkName: "temporal-go", SdkVersion: "1.50.0", Status: 1,
			StartTime: now, HeartbeatTime: now, ElapsedSinceLastHeartbeat: durationpb.New(time.Second),
			WorkflowTaskSlotsInfo: slots, ActivityTaskSlotsInfo: slots, NexusTaskSlotsInfo: slots, LocalActivitySlotsInfo: slots,
		}},
	}
	m := req.ProtoReflect()
	b.ReportAllocs()
	for b.Loop() {
		if err := wellFormed(m); err != nil {
			b.Fatal(err)
		}
	}
}
