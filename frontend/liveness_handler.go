package frontend

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/protobuf/types/known/timestamppb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// Page sizes of the extended API.
const (
	// ListWorkerLivenessPageSizeDefault is the page size of a request that names none.
	ListWorkerLivenessPageSizeDefault = 100
	// ListWorkerLivenessPageSizeMax caps page sizes (larger requests are clamped).
	ListWorkerLivenessPageSizeMax = 1000
	// ListHostsPageSizeDefault is the page size of a ListHosts request that names none.
	ListHostsPageSizeDefault = 100
	// ListHostsPageSizeMax caps ListHosts page sizes.
	ListHostsPageSizeMax = 1000
)

// LivenessHandler serves vigil's own WorkerLivenessService.
type LivenessHandler struct {
	livenesspb.UnimplementedWorkerLivenessServiceServer
	deps Deps
	// watchers counts open watches (WatchWorkers and the web page's stream); changed, and
	// exported, under watchersMu, so that the gauge's last value is the count's.
	watchersMu sync.Mutex
	watchers   int
	// stopping is closed by Stop: open watches end.
	stopping chan struct{}
	stopOnce sync.Once
}

// addWatchers changes the count of open watches by d and exports it.
func (h *LivenessHandler) addWatchers(d int, open tally.Gauge) {
	h.watchersMu.Lock()
	defer h.watchersMu.Unlock()
	h.watchers += d
	open.Update(float64(h.watchers))
}

// NewLivenessHandler returns the extended API handler.
func NewLivenessHandler(deps Deps) *LivenessHandler {
	return &LivenessHandler{deps: deps.withDefaults(), stopping: make(chan struct{})}
}

// Stop ends every open watch (WatchWorkers, the web page's streams), so that a graceful stop of
// the gRPC and HTTP servers does not wait for them. Idempotent.
func (h *LivenessHandler) Stop() {
	h.stopOnce.Do(func() { close(h.stopping) })
}

// RecordHeartbeat renews one worker's lease with the extended options.
func (h *LivenessHandler) RecordHeartbeat(ctx context.Context, req *livenesspb.RecordHeartbeatRequest) (*livenesspb.RecordHeartbeatResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	entry := &workerpb.HeartbeatEntry{
		Heartbeat:     req.GetWorkerHeartbeat(),
		LeaseDuration: req.GetLeaseDuration(),
		Bound:         bindings(req.GetBoundActivities()),
		Unbound:       bindings(req.GetUnboundActivities()),
		ConflictToken: req.ConflictToken,
	}
	outcome := recordHeartbeats(ctx, h.deps.History, ns, []*workerpb.HeartbeatEntry{entry})[0]
	if outcome.err != nil {
		if e := outcome.entryErr; isConflictTokenMismatch(req, e) {
			return nil, NewConflictTokenMismatch(e.GetMessage(), e.GetCurrentConflictToken())
		}
		return nil, outcome.err
	}
	return &livenesspb.RecordHeartbeatResponse{
		LeaseDeadline: outcome.result.GetLeaseDeadline(),
		ConflictToken: outcome.result.GetConflictToken(),
		ShouldDrain:   outcome.result.GetShouldDrain(),
		Resurrected:   outcome.result.GetResurrected(),
	}, nil
}

// isConflictTokenMismatch tells a stale-token refusal from history's other FailedPrecondition
// entry errors (a cleaned-up worker, for one): history flags it.
func isConflictTokenMismatch(_ *livenesspb.RecordHeartbeatRequest, e *workerpb.EntryError) bool {
	return e.GetConflictTokenMismatch()
}

func bindings(in []*livenesspb.ActivityBinding) []*workerpb.ActivityBinding {
	if len(in) == 0 {
		return nil
	}
	out := make([]*workerpb.ActivityBinding, len(in))
	for i, b := range in {
		out[i] = &workerpb.ActivityBinding{ActivityId: b.GetActivityId(), RunId: b.GetRunId(), Stamp: b.GetStamp()}
	}
	return out
}

// DescribeWorkerLiveness returns the full record, whatever the worker's state.
func (h *LivenessHandler) DescribeWorkerLiveness(ctx context.Context, req *livenesspb.DescribeWorkerLivenessRequest) (*livenesspb.DescribeWorkerLivenessResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	resp, err := h.deps.History.DescribeWorker(ctx, &workerpb.DescribeWorkerRequest{
		NamespaceId:            ns.ID,
		WorkerInstanceKey:      req.GetWorkerInstanceKey(),
		IncludeBoundActivities: req.GetIncludeBoundActivities(),
	})
	if err != nil {
		return nil, err
	}
	out := &livenesspb.DescribeWorkerLivenessResponse{
		Worker: workerLiveness(resp.GetWorker()), ExpiryBrake: expiryBrake(resp.GetExpiryBrake()),
	}
	if req.GetIncludeMovedActivities() {
		if out.MovedActivities, err = movedActivities(ctx, h.deps.History, ns, req.GetWorkerInstanceKey()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// expiryBrake shows history's expiry brake in the liveness view.
func expiryBrake(b *workerpb.ExpiryBrakeStatus) *livenesspb.ExpiryBrake {
	if b == nil {
		return nil
	}
	return &livenesspb.ExpiryBrake{
		Engaged: b.GetEngaged(), Reasons: b.GetReasons(), Since: b.GetSince(), HeldExpiries: b.GetHeldExpiries(),
	}
}

// ListWorkerLiveness pages through the namespace's workers in any state.
func (h *LivenessHandler) ListWorkerLiveness(ctx context.Context, req *livenesspb.ListWorkerLivenessRequest) (*livenesspb.ListWorkerLivenessResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	pageSize := int32(ListWorkerLivenessPageSizeDefault)
	if req.GetPageSize() > 0 {
		pageSize = min(req.GetPageSize(), ListWorkerLivenessPageSizeMax)
	}
	fp := fingerprint("ListWorkerLiveness", ns.ID, req.GetState().String())
	token, err := decodePageToken(req.GetNextPageToken(), fp)
	if err != nil {
		return nil, err
	}
	page, err := h.deps.History.ListWorkers(ctx, &workerpb.ListWorkersRequest{
		NamespaceId:   ns.ID,
		Status:        historyStatus(req.GetState()),
		PageSize:      pageSize,
		NextPageToken: token.History,
	})
	if err != nil {
		return nil, err
	}
	resp := &livenesspb.ListWorkerLivenessResponse{ExpiryBrake: expiryBrake(page.GetExpiryBrake())}
	for _, record := range page.GetWorkers() {
		w := workerLiveness(record)
		w.BoundActivities = nil
		resp.Workers = append(resp.Workers, w)
	}
	if len(page.GetNextPageToken()) > 0 {
		resp.NextPageToken = encodePageToken(pageToken{Fingerprint: fp, History: page.GetNextPageToken()})
	}
	return resp, nil
}

// DrainWorker asks a worker to drain.
func (h *LivenessHandler) DrainWorker(ctx context.Context, req *livenesspb.DrainWorkerRequest) (*livenesspb.DrainWorkerResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	if _, err := h.deps.History.DrainWorker(ctx, &workerpb.DrainWorkerRequest{
		NamespaceId:       ns.ID,
		WorkerInstanceKey: req.GetWorkerInstanceKey(),
	}); err != nil {
		return nil, err
	}
	return &livenesspb.DrainWorkerResponse{}, nil
}

// ListHosts groups the namespace's ACTIVE and INACTIVE workers by the host name they report. A
// host is online while any of its workers is ACTIVE, so one crashed process does not mark a
// busy machine offline, and a machine goes offline only when its last worker's lease is gone.
// CLEANED_UP workers are forgotten and do not count. Every call scans the namespace's workers;
// pages are cut from the sorted host list.
func (h *LivenessHandler) ListHosts(ctx context.Context, req *livenesspb.ListHostsRequest) (*livenesspb.ListHostsResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	pageSize := ListHostsPageSizeDefault
	if req.GetPageSize() > 0 {
		pageSize = min(int(req.GetPageSize()), ListHostsPageSizeMax)
	}
	fp := fingerprint("ListHosts", ns.ID)
	token, err := decodePageToken(req.GetNextPageToken(), fp)
	if err != nil {
		return nil, err
	}

	hosts := make(map[string]*livenesspb.HostLiveness)
	err = scanWorkers(ctx, h.deps.History, ns, workerpb.WorkerStatus_WORKER_STATUS_UNSPECIFIED, func(record *workerpb.WorkerRecord) {
		state := record.GetState()
		status := state.GetStatus()
		if status != workerpb.WorkerStatus_WORKER_STATUS_ACTIVE && status != workerpb.WorkerStatus_WORKER_STATUS_INACTIVE {
			return
		}
		name := state.GetLastHeartbeat().GetHostInfo().GetHostName()
		host := hosts[name]
		if host == nil {
			host = &livenesspb.HostLiveness{HostName: name}
			hosts[name] = host
		}
		if status == workerpb.WorkerStatus_WORKER_STATUS_ACTIVE {
			host.Online = true
			host.ActiveWorkers++
		} else {
			host.InactiveWorkers++
		}
		if t := state.GetLastHeartbeatTime(); t != nil && (host.LastHeartbeatTime == nil || t.AsTime().After(host.LastHeartbeatTime.AsTime())) {
			host.LastHeartbeatTime = timestamppb.New(t.AsTime())
		}
	})
	if err != nil {
		return nil, err
	}

	sorted := make([]*livenesspb.HostLiveness, 0, len(hosts))
	for _, host := range hosts {
		sorted = append(sorted, host)
	}
	slices.SortFunc(sorted, func(a, b *livenesspb.HostLiveness) int { return cmp.Compare(a.HostName, b.HostName) })
	start := 0
	if len(req.GetNextPageToken()) > 0 {
		// Resume after the last host returned, even if hosts appeared or vanished since.
		start, _ = slices.BinarySearchFunc(sorted, token.After, func(h *livenesspb.HostLiveness, after string) int {
			if h.HostName <= after {
				return -1
			}
			return 1
		})
	}
	end := min(start+pageSize, len(sorted))
	resp := &livenesspb.ListHostsResponse{Hosts: sorted[start:end]}
	if end < len(sorted) {
		resp.NextPageToken = encodePageToken(pageToken{Fingerprint: fp, After: sorted[end-1].HostName})
	}
	return resp, nil
}

// DescribeCluster lists the vigil hosts of the cluster this server belongs to.
func (h *LivenessHandler) DescribeCluster(ctx context.Context, _ *livenesspb.DescribeClusterRequest) (*livenesspb.DescribeClusterResponse, error) {
	if h.deps.Cluster == nil {
		return nil, serviceerror.NewUnimplemented("this server does not describe its cluster")
	}
	return h.deps.Cluster.DescribeCluster(ctx)
}
