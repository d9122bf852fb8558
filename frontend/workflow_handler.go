package frontend

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/memrelease"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/frontend/query"
)

// Defaults of the public worker listing and of long polls.
const (
	// ListWorkersPageSizeDefault is the page size of a ListWorkers request that names none.
	ListWorkersPageSizeDefault = 100
	// ListWorkersPageSizeMax caps the page size of ListWorkers (larger requests are clamped).
	ListWorkersPageSizeMax = 1000
	// ListWorkersMaxHistoryPages bounds the history pages one ListWorkers call reads while
	// filling a page with a selective query; it then returns a short page and a token.
	ListWorkersMaxHistoryPages = 16
	// countWorkersHistoryPageSize is the page size CountWorkers and ListHosts scan history with.
	countWorkersHistoryPageSize = 1000

	// LongPollTimeoutDefault is the longest an empty poll is held, as Temporal's server does.
	LongPollTimeoutDefault = 60 * time.Second
	// LongPollMarginDefault is how long before the client's deadline (as the frontend sees it
	// on arrival) every long poll answers, so that the answer arrives before the client gives
	// up: a DeadlineExceeded poll is logged by the SDK as a failure and backs off, and a
	// handle.Get whose PollActivityExecution outlives its deadline fails (not retried; a poll
	// the server could not answer before its own deadline ends in RST_STREAM CANCEL). 1 s was
	// eaten on a loaded 2-core host by scheduling, the history round trip and the answer's way
	// back; 5 s holds there, and is under a tenth of the 60-70 s the SDK's polls allow (the
	// SDK polls again at once).
	LongPollMarginDefault = 5 * time.Second
)

// WorkflowHandler serves the subset of temporal.api.workflowservice.v1.WorkflowService that
// SDK workers and `temporal worker` commands use for worker liveness, standalone activities
// (activity_handler.go) and worker commands (worker_commands.go). Every other method is
// Unimplemented (with the "method X not implemented" text the SDK understands).
type WorkflowHandler struct {
	workflowservice.UnimplementedWorkflowServiceServer

	deps                   Deps
	pollCompleteOnShutdown bool
	longPollTimeout        time.Duration
	longPollMargin         time.Duration

	polls    *pollRegistry
	blobs    blobLimits
	deleter  *namespaceDeleter
	stopOnce sync.Once
	stopping chan struct{}
}

// WorkflowHandlerOption changes a WorkflowHandler's defaults.
type WorkflowHandlerOption func(*WorkflowHandler)

// WithPollCompleteOnShutdown advertises the worker_poll_complete_on_shutdown capability, which
// is the default. With it, SDK workers stop cancelling their polls at shutdown and wait for the
// server to complete them: ShutdownWorker completes every PollWorkflowTaskQueue and
// PollActivityTaskQueue carrying the worker's instance key. (The worker-command poll carries
// another key; the SDK cancels it itself.)
func WithPollCompleteOnShutdown() WorkflowHandlerOption {
	return func(h *WorkflowHandler) { h.pollCompleteOnShutdown = true }
}

// WithoutPollCompleteOnShutdown stops advertising worker_poll_complete_on_shutdown: SDK
// workers then cancel their own polls at shutdown. ShutdownWorker still completes them.
func WithoutPollCompleteOnShutdown() WorkflowHandlerOption {
	return func(h *WorkflowHandler) { h.pollCompleteOnShutdown = false }
}

// WithLongPollTimeout sets how long an empty poll is held at most, and how long before the
// client's deadline it returns (defaults LongPollTimeoutDefault and LongPollMarginDefault).
func WithLongPollTimeout(timeout, margin time.Duration) WorkflowHandlerOption {
	return func(h *WorkflowHandler) {
		if timeout > 0 {
			h.longPollTimeout = timeout
		}
		if margin >= 0 {
			h.longPollMargin = margin
		}
	}
}

// NewWorkflowHandler returns the public API handler.
func NewWorkflowHandler(deps Deps, opts ...WorkflowHandlerOption) *WorkflowHandler {
	deps = deps.withDefaults()
	h := &WorkflowHandler{
		deps:                   deps,
		pollCompleteOnShutdown: true,
		longPollTimeout:        LongPollTimeoutDefault,
		longPollMargin:         LongPollMarginDefault,
		polls:                  newPollRegistry(deps.TimeSource),
		blobs:                  newBlobLimits(deps),
		deleter:                newNamespaceDeleter(deps),
		stopping:               make(chan struct{}),
	}
	for _, opt := range opts {
		opt(h)
	}
	return h
}

// Stop completes every open long poll at once and makes new ones return immediately, so that
// a graceful server stop does not wait a minute for them. Idempotent.
func (h *WorkflowHandler) Stop() {
	h.stopOnce.Do(func() { close(h.stopping) })
	h.deleter.stopAndWait()
}

// GetSystemInfo advertises every capability vigil implements and none that it does not (the
// SDKs switch behaviour on them, and sdk-core warns about each one missing):
//   - internal_error_differentiation: Internal errors are not retryable, Unavailable ones are;
//   - activity_failure_include_heartbeat: the heartbeat details a worker sends with a failure
//     are kept and handed to the next attempt;
//   - encoded_failure_attributes: failures are stored and returned as sent, encoded attributes
//     included.
//
// The rest are workflow, schedule, Nexus and deployment features that vigil does not serve.
func (h *WorkflowHandler) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{
		ServerVersion: ServerVersion,
		Capabilities:  systemCapabilities(),
	}, nil
}

func systemCapabilities() *workflowservice.GetSystemInfoResponse_Capabilities {
	return &workflowservice.GetSystemInfoResponse_Capabilities{
		InternalErrorDifferentiation:    true,
		ActivityFailureIncludeHeartbeat: true,
		EncodedFailureAttributes:        true,
	}
}

// RecordWorkerHeartbeat records every heartbeat of the request; it succeeds only if all of them
// were recorded. History derives the lease of SDK workers (lease_duration 0).
func (h *WorkflowHandler) RecordWorkerHeartbeat(ctx context.Context, req *workflowservice.RecordWorkerHeartbeatRequest) (*workflowservice.RecordWorkerHeartbeatResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	if len(req.GetWorkerHeartbeat()) == 0 {
		return &workflowservice.RecordWorkerHeartbeatResponse{}, nil
	}
	entries := make([]*workerpb.HeartbeatEntry, len(req.GetWorkerHeartbeat()))
	for i, hb := range req.GetWorkerHeartbeat() {
		entries[i] = &workerpb.HeartbeatEntry{Heartbeat: hb}
	}
	outcomes := recordHeartbeats(ctx, h.deps.History, ns, entries)
	if err := heartbeatsError(entries, outcomes); err != nil {
		return nil, err
	}
	return &workflowservice.RecordWorkerHeartbeatResponse{}, nil
}

// ShutdownWorker makes the worker INACTIVE (reason SHUTDOWN) with its final snapshot, and
// completes its open polls: workflow polls here, activity polls in matching (both answer the
// worker's polls that arrive just after empty at once, for a short while). Shutting down a worker history does not know is a success: the
// call is idempotent and the SDK sends it once, without retry.
func (h *WorkflowHandler) ShutdownWorker(ctx context.Context, req *workflowservice.ShutdownWorkerRequest) (*workflowservice.ShutdownWorkerResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	principal, admin := principalOf(ctx, ns)
	completePolls := func() {
		h.polls.complete(req.GetWorkerInstanceKey())
		if h.deps.Matching != nil {
			h.deps.Matching.CompletePollsOfWorker(ns.ID, req.GetWorkerInstanceKey())
		}
	}
	// Polls first: whatever history says, this worker will not take the tasks of an open poll.
	// Except for a caller that may not own the worker: history checks ownership first, so that
	// another principal's ShutdownWorker cannot end the owner's polls.
	checkOwnerFirst := principal != "" && !admin
	if !checkOwnerFirst {
		completePolls()
	}
	_, err = h.deps.History.ShutdownWorker(ctx, &workerpb.ShutdownWorkerRequest{
		NamespaceId:       ns.ID,
		Namespace:         ns.Name,
		WorkerInstanceKey: req.GetWorkerInstanceKey(),
		Heartbeat:         req.GetWorkerHeartbeat(),
		Reason:            req.GetReason(),
		Principal:         principal,
		PrincipalIsAdmin:  admin,
	})
	var denied *serviceerror.PermissionDenied
	if checkOwnerFirst && !errors.As(err, &denied) {
		completePolls()
	}
	var notFound *serviceerror.NotFound
	if err != nil && !errors.As(err, &notFound) {
		return nil, err
	}
	return &workflowservice.ShutdownWorkerResponse{}, nil
}

// DescribeWorker returns the worker's last heartbeat with the server-derived status. A
// CLEANED_UP worker is NotFound.
func (h *WorkflowHandler) DescribeWorker(ctx context.Context, req *workflowservice.DescribeWorkerRequest) (*workflowservice.DescribeWorkerResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	resp, err := h.deps.History.DescribeWorker(ctx, &workerpb.DescribeWorkerRequest{
		NamespaceId:       ns.ID,
		WorkerInstanceKey: req.GetWorkerInstanceKey(),
	})
	if err != nil {
		return nil, err
	}
	hb, visible := publicHeartbeat(resp.GetWorker())
	if !visible {
		return nil, serviceerror.NewNotFoundf("worker %q not found in namespace %q", req.GetWorkerInstanceKey(), ns.Name)
	}
	return &workflowservice.DescribeWorkerResponse{WorkerInfo: &workerapipb.WorkerInfo{WorkerHeartbeat: hb}}, nil
}

// ListWorkers pages through the namespace's workers that match the query, CLEANED_UP ones
// excluded. A page can hold fewer workers than asked for even when more follow: only an empty
// next_page_token means the end.
func (h *WorkflowHandler) ListWorkers(ctx context.Context, req *workflowservice.ListWorkersRequest) (*workflowservice.ListWorkersResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	q, err := parseQuery(req.GetQuery())
	if err != nil {
		return nil, err
	}
	pageSize := int(req.GetPageSize())
	if pageSize <= 0 {
		pageSize = ListWorkersPageSizeDefault
	}
	pageSize = min(pageSize, ListWorkersPageSizeMax)
	fp := fingerprint("ListWorkers", ns.ID, req.GetQuery())
	token, err := decodePageToken(req.GetNextPageToken(), fp)
	if err != nil {
		return nil, err
	}

	resp := &workflowservice.ListWorkersResponse{}
	historyToken := token.History
	// History is asked for exactly the number of workers still missing, and every page it
	// returns is consumed whole: the continuation is then always history's own token, so no
	// worker is skipped or repeated across pages, whatever the filter.
	for range ListWorkersMaxHistoryPages {
		page, err := h.deps.History.ListWorkers(ctx, &workerpb.ListWorkersRequest{
			NamespaceId:   ns.ID,
			PageSize:      int32(pageSize - len(resp.Workers)),
			NextPageToken: historyToken,
		})
		if err != nil {
			return nil, err
		}
		for _, record := range page.GetWorkers() {
			hb, visible := publicHeartbeat(record)
			if !visible || !q.Matches(queryWorker(record, hb)) {
				continue
			}
			// Both fields, as Temporal's server fills them: `workers` is the lean listing,
			// `workers_info` (deprecated) the full heartbeat that older clients read.
			//lint:ignore SA1019 released servers still fill it; older clients read only this field.
			resp.WorkersInfo = append(resp.WorkersInfo, &workerapipb.WorkerInfo{WorkerHeartbeat: hb})
			resp.Workers = append(resp.Workers, listInfo(hb))
		}
		historyToken = page.GetNextPageToken()
		if len(historyToken) == 0 || len(resp.Workers) >= pageSize {
			break
		}
	}
	if len(historyToken) > 0 {
		resp.NextPageToken = encodePageToken(pageToken{Fingerprint: fp, History: historyToken})
	}
	return resp, nil
}

// CountWorkers counts the workers ListWorkers would return for the same query.
func (h *WorkflowHandler) CountWorkers(ctx context.Context, req *workflowservice.CountWorkersRequest) (*workflowservice.CountWorkersResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	q, err := parseQuery(req.GetQuery())
	if err != nil {
		return nil, err
	}
	var count int64
	err = scanWorkers(ctx, h.deps.History, ns, workerpb.WorkerStatus_WORKER_STATUS_UNSPECIFIED, func(record *workerpb.WorkerRecord) {
		if hb, visible := publicHeartbeat(record); visible && q.Matches(queryWorker(record, hb)) {
			count++
		}
	})
	if err != nil {
		return nil, err
	}
	return &workflowservice.CountWorkersResponse{Count: count}, nil
}

// PollWorkflowTaskQueue is an empty long poll: vigil runs no workflows, but the SDK starts
// workflow pollers unless DisableWorkflowWorker is set, and an immediate empty answer would
// make them spin. It returns an empty response at min(longPollTimeout, client deadline -
// margin), when the worker shuts down, or when the server stops.
//
// It never returns InvalidArgument or NamespaceNotFound: the SDK treats those as fatal for the
// worker. An unknown namespace is Unavailable, so the worker backs off and
// logs "Failed to poll for task" until the namespace is configured. (Answering empty instead
// would hide the misconfiguration entirely; DescribeNamespace has already failed loudly at
// Worker.Start in the usual case.)
func (h *WorkflowHandler) PollWorkflowTaskQueue(ctx context.Context, req *workflowservice.PollWorkflowTaskQueueRequest) (*workflowservice.PollWorkflowTaskQueueResponse, error) {
	if _, err := h.deps.Namespaces.GetByName(req.GetNamespace()); err != nil {
		return nil, serviceerror.NewUnavailablef("namespace %q is not served by this server", req.GetNamespace())
	}
	if err := h.longPoll(ctx, req.GetWorkerInstanceKey()); err != nil {
		return nil, err
	}
	return &workflowservice.PollWorkflowTaskQueueResponse{}, nil
}

// longPoll waits until an empty poll answer is due. It returns an error only when the client
// went away.
func (h *WorkflowHandler) longPoll(ctx context.Context, workerInstanceKey string) error {
	wait := h.longPollTimeout
	if deadline, ok := ctx.Deadline(); ok {
		// ctx deadlines are wall-clock times, so this is measured on the wall clock.
		wait = min(wait, time.Until(deadline)-h.longPollMargin)
	}
	if wait <= 0 {
		return nil
	}
	completed, cancel := h.polls.register(workerInstanceKey)
	defer cancel()
	timerC, timer := h.deps.TimeSource.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timerC:
	case <-completed:
	case <-h.stopping:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func parseQuery(text string) (*query.Query, error) {
	q, err := query.Parse(text)
	if err != nil {
		return nil, serviceerror.NewInvalidArgument(err.Error())
	}
	return q, nil
}

// scanWorkers calls fn for every worker of the namespace with the given history status
// (UNSPECIFIED: all), reading history page by page.
func scanWorkers(ctx context.Context, history HistoryClient, ns *namespace.Namespace, status workerpb.WorkerStatus, fn func(*workerpb.WorkerRecord)) error {
	var token []byte
	for {
		page, err := history.ListWorkers(ctx, &workerpb.ListWorkersRequest{
			NamespaceId:   ns.ID,
			Status:        status,
			PageSize:      countWorkersHistoryPageSize,
			NextPageToken: token,
		})
		if err != nil {
			return err
		}
		for _, record := range page.GetWorkers() {
			fn(record)
		}
		token = page.GetNextPageToken()
		if len(token) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// ShutdownPollTombstoneTTL is how long after ShutdownWorker the worker's new polls are
// answered empty at once. The SDK stops polling before it sends ShutdownWorker, so this only
// has to outlast polls already in flight.
const ShutdownPollTombstoneTTL = 10 * time.Second

// pollRegistry tracks open polls by worker instance key, so that ShutdownWorker can complete
// them.
type pollRegistry struct {
	timeSource clock.TimeSource

	mu    sync.Mutex
	polls map[string]map[*openPoll]struct{}
	// tombstones: worker instance key → end of the time its polls are answered at once.
	// sweptAt is when the expired ones were last dropped; tombstonesPeak is the map's largest
	// size since it was last made anew (a deploy's shutdowns grow it).
	tombstones     map[string]time.Time
	tombstonesPeak int
	sweptAt        time.Time
}

type openPoll struct{ done chan struct{} }

func newPollRegistry(timeSource clock.TimeSource) *pollRegistry {
	return &pollRegistry{
		timeSource: timeSource,
		polls:      make(map[string]map[*openPoll]struct{}),
		tombstones: make(map[string]time.Time),
	}
}

// register records an open poll of the worker. The channel is closed when the worker shuts
// down (at once if it just did); cancel must be called when the poll ends.
func (r *pollRegistry) register(workerInstanceKey string) (<-chan struct{}, func()) {
	p := &openPoll{done: make(chan struct{})}
	if workerInstanceKey == "" {
		return p.done, func() {}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if until, ok := r.tombstones[workerInstanceKey]; ok && r.timeSource.Now().Before(until) {
		close(p.done)
		return p.done, func() {}
	}
	if r.polls[workerInstanceKey] == nil {
		r.polls[workerInstanceKey] = make(map[*openPoll]struct{})
	}
	r.polls[workerInstanceKey][p] = struct{}{}
	return p.done, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.polls[workerInstanceKey], p)
		if len(r.polls[workerInstanceKey]) == 0 {
			delete(r.polls, workerInstanceKey)
		}
	}
}

// complete ends every open poll of the worker, and its polls of the next
// ShutdownPollTombstoneTTL at once.
func (r *pollRegistry) complete(workerInstanceKey string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.timeSource.Now()
	// Expired tombstones are swept here rather than by a timer, at most every half TTL: a
	// fleet's deploy shuts down thousands of workers a second, and a sweep on every shutdown
	// walked every tombstone of the last TTL each time, quadratic in the burst. Lookups compare the time, so a
	// tombstone kept past its TTL answers nothing.
	if now.Sub(r.sweptAt) >= ShutdownPollTombstoneTTL/2 || now.Before(r.sweptAt) {
		r.sweptAt = now
		for key, until := range r.tombstones {
			if !now.Before(until) {
				delete(r.tombstones, key)
			}
		}
		r.tombstones, _ = memrelease.ShrinkMap(r.tombstones, &r.tombstonesPeak, memrelease.ShrinkMapMin)
	}
	r.tombstones[workerInstanceKey] = now.Add(ShutdownPollTombstoneTTL)
	r.tombstonesPeak = max(r.tombstonesPeak, len(r.tombstones))
	polls := r.polls[workerInstanceKey]
	delete(r.polls, workerInstanceKey)
	for p := range polls {
		close(p.done)
	}
	return len(polls)
}

// open returns the number of open polls of a worker (for tests).
func (r *pollRegistry) open(workerInstanceKey string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.polls[workerInstanceKey])
}
