package frontend

import (
	enumspb "go.temporal.io/api/enums/v1"
	workerapipb "go.temporal.io/api/worker/v1"
	"google.golang.org/protobuf/proto"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/frontend/query"
)

// publicStatus is the status the public API shows for a worker: the server's verdict, not the
// worker's word (docs/architecture.md, "Invariants"). visible is false for a CLEANED_UP worker, which the public
// API treats as gone.
//
//	ACTIVE     → what the worker reported: RUNNING or SHUTTING_DOWN. A worker that holds a lease
//	             but reported nothing (UNSPECIFIED) is RUNNING; one that claims SHUTDOWN while
//	             still heartbeating is SHUTTING_DOWN (it is not down: its lease is live).
//	INACTIVE   → SHUTDOWN, whatever it last reported: its lease ran out or it shut down.
//	CLEANED_UP → not shown.
func publicStatus(state *workerpb.WorkerState) (status enumspb.WorkerStatus, visible bool) {
	switch state.GetStatus() {
	case workerpb.WorkerStatus_WORKER_STATUS_ACTIVE:
		switch state.GetLastHeartbeat().GetStatus() {
		case enumspb.WORKER_STATUS_SHUTTING_DOWN, enumspb.WORKER_STATUS_SHUTDOWN:
			return enumspb.WORKER_STATUS_SHUTTING_DOWN, true
		default:
			return enumspb.WORKER_STATUS_RUNNING, true
		}
	case workerpb.WorkerStatus_WORKER_STATUS_INACTIVE:
		return enumspb.WORKER_STATUS_SHUTDOWN, true
	default:
		// CLEANED_UP, or a record without a status: nothing the public API should show.
		return enumspb.WORKER_STATUS_UNSPECIFIED, false
	}
}

// publicHeartbeat returns the worker's last heartbeat with the server-derived status, or false
// when the worker must not be shown. The stored heartbeat is not modified.
func publicHeartbeat(record *workerpb.WorkerRecord) (*workerapipb.WorkerHeartbeat, bool) {
	status, visible := publicStatus(record.GetState())
	if !visible {
		return nil, false
	}
	hb := proto.CloneOf(record.GetState().GetLastHeartbeat())
	if hb == nil {
		hb = &workerapipb.WorkerHeartbeat{}
	}
	if hb.WorkerInstanceKey == "" {
		hb.WorkerInstanceKey = record.GetWorkerInstanceKey()
	}
	hb.Status = status
	return hb, true
}

// listInfo is the WorkerListInfo view of a heartbeat, as ListWorkersResponse.workers carries it.
func listInfo(hb *workerapipb.WorkerHeartbeat) *workerapipb.WorkerListInfo {
	return &workerapipb.WorkerListInfo{
		WorkerInstanceKey: hb.GetWorkerInstanceKey(),
		WorkerIdentity:    hb.GetWorkerIdentity(),
		TaskQueue:         hb.GetTaskQueue(),
		DeploymentVersion: hb.GetDeploymentVersion(),
		SdkName:           hb.GetSdkName(),
		SdkVersion:        hb.GetSdkVersion(),
		Status:            hb.GetStatus(),
		StartTime:         hb.GetStartTime(),
		HostName:          hb.GetHostInfo().GetHostName(),
		WorkerGroupingKey: hb.GetHostInfo().GetWorkerGroupingKey(),
		ProcessId:         hb.GetHostInfo().GetProcessId(),
		Plugins:           hb.GetPlugins(),
		Drivers:           hb.GetDrivers(),
	}
}

// queryWorker is what a ListWorkers/CountWorkers query is evaluated against. HeartbeatTime is
// the server's receive time of the last accepted heartbeat, so that "HeartbeatTime < X" finds
// silent workers whatever their clocks say; the worker's own timestamp is used only when the
// server has none.
func queryWorker(record *workerpb.WorkerRecord, hb *workerapipb.WorkerHeartbeat) *query.Worker {
	w := &query.Worker{
		WorkerInstanceKey: hb.GetWorkerInstanceKey(),
		WorkerIdentity:    hb.GetWorkerIdentity(),
		HostName:          hb.GetHostInfo().GetHostName(),
		TaskQueue:         hb.GetTaskQueue(),
		DeploymentName:    hb.GetDeploymentVersion().GetDeploymentName(),
		BuildID:           hb.GetDeploymentVersion().GetBuildId(),
		SdkName:           hb.GetSdkName(),
		SdkVersion:        hb.GetSdkVersion(),
		Status:            hb.GetStatus(),
	}
	if ts := hb.GetStartTime(); ts != nil {
		w.StartTime = ts.AsTime()
	}
	if ts := record.GetState().GetLastHeartbeatTime(); ts != nil {
		w.HeartbeatTime = ts.AsTime()
	} else if ts := hb.GetHeartbeatTime(); ts != nil {
		w.HeartbeatTime = ts.AsTime()
	}
	return w
}

func livenessState(s workerpb.WorkerStatus) livenesspb.LivenessState {
	switch s {
	case workerpb.WorkerStatus_WORKER_STATUS_ACTIVE:
		return livenesspb.LivenessState_LIVENESS_STATE_ACTIVE
	case workerpb.WorkerStatus_WORKER_STATUS_INACTIVE:
		return livenesspb.LivenessState_LIVENESS_STATE_INACTIVE
	case workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP:
		return livenesspb.LivenessState_LIVENESS_STATE_CLEANED_UP
	}
	return livenesspb.LivenessState_LIVENESS_STATE_UNSPECIFIED
}

func historyStatus(s livenesspb.LivenessState) workerpb.WorkerStatus {
	switch s {
	case livenesspb.LivenessState_LIVENESS_STATE_ACTIVE:
		return workerpb.WorkerStatus_WORKER_STATUS_ACTIVE
	case livenesspb.LivenessState_LIVENESS_STATE_INACTIVE:
		return workerpb.WorkerStatus_WORKER_STATUS_INACTIVE
	case livenesspb.LivenessState_LIVENESS_STATE_CLEANED_UP:
		return workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP
	}
	return workerpb.WorkerStatus_WORKER_STATUS_UNSPECIFIED
}

func inactiveReason(r workerpb.InactiveReason) livenesspb.InactiveReason {
	switch r {
	case workerpb.InactiveReason_INACTIVE_REASON_LEASE_EXPIRED:
		return livenesspb.InactiveReason_INACTIVE_REASON_LEASE_EXPIRED
	case workerpb.InactiveReason_INACTIVE_REASON_SHUTDOWN:
		return livenesspb.InactiveReason_INACTIVE_REASON_SHUTDOWN
	case workerpb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST:
		return livenesspb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST
	}
	return livenesspb.InactiveReason_INACTIVE_REASON_UNSPECIFIED
}

// workerLiveness is the extended API's view of a liveness record. The last heartbeat is shown
// as the worker sent it.
func workerLiveness(record *workerpb.WorkerRecord) *livenesspb.WorkerLiveness {
	s := record.GetState()
	out := &livenesspb.WorkerLiveness{
		WorkerInstanceKey:           record.GetWorkerInstanceKey(),
		State:                       livenessState(s.GetStatus()),
		LastHeartbeat:               s.GetLastHeartbeat(),
		LeaseDeadline:               s.GetLeaseDeadline(),
		LeaseDuration:               s.GetLeaseDuration(),
		LastHeartbeatTime:           s.GetLastHeartbeatTime(),
		FirstHeartbeatTime:          s.GetFirstHeartbeatTime(),
		InactiveReason:              inactiveReason(s.GetInactiveReason()),
		InactiveTime:                s.GetInactiveTime(),
		CleanupTime:                 s.GetCleanupTime(),
		ResurrectionCount:           s.GetResurrectionCount(),
		ConflictToken:               s.GetConflictToken(),
		DrainRequested:              s.GetDrainRequested(),
		BoundActivityCount:          s.GetBoundActivityCount(),
		PendingRescheduleActivities: pendingRescheduleActivities(s),
		SuspectSince:                s.GetSuspectSince(),
		SuspectDeadline:             s.GetSuspectDeadline(),
	}
	if s.GetSuspectDeadline() != nil {
		out.SuspectReason = "connection closed"
	}
	if out.WorkerInstanceKey == "" {
		out.WorkerInstanceKey = s.GetLastHeartbeat().GetWorkerInstanceKey()
	}
	for _, a := range record.GetBoundActivities() {
		out.BoundActivities = append(out.BoundActivities, &livenesspb.BoundActivity{
			ActivityId: a.GetActivityId(),
			RunId:      a.GetRunId(),
			Stamp:      a.GetStamp(),
			BoundTime:  a.GetBoundTime(),
		})
	}
	return out
}

func pendingRescheduleActivities(s *workerpb.WorkerState) int64 {
	var n int64
	for _, p := range s.GetPendingReschedules() {
		n += int64(p.GetActivityCount())
	}
	return n
}
