package frontend

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	activityv1 "go.temporal.io/api/activity/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/frontend/query"
	"github.com/vigilhq/vigil/frontend/searchattr"
)

// Page sizes of the standalone-activity listing.
const (
	// ListActivitiesPageSizeDefault is the page size of a ListActivityExecutions request that
	// names none.
	ListActivitiesPageSizeDefault = 100
	// ListActivitiesPageSizeMax caps the page size (larger requests are clamped).
	ListActivitiesPageSizeMax = 1000
	// ListActivitiesMaxHistoryPages bounds the history pages one call reads while filling a
	// page with a selective query; it then returns a short page and a token.
	ListActivitiesMaxHistoryPages = 16
	// countActivitiesHistoryPageSize is the page size CountActivityExecutions scans with.
	countActivitiesHistoryPageSize = 1000
)

// parseActivityQuery parses an activity query that may name the namespace's custom search
// attributes.
func parseActivityQuery(ns *namespace.Namespace, text string) (*query.Query, error) {
	q, err := query.ParseActivitiesWith(text, ns.SearchAttributes)
	if err != nil {
		return nil, serviceerror.NewInvalidArgument(err.Error())
	}
	return q, nil
}

// queryActivity is what an activity query sees of a listed activity: the public status, and
// the worker of the running attempt.
func queryActivity(ns *namespace.Namespace, l *activitypb.ListedActivity, info *activityv1.ActivityExecutionInfo) *query.Activity {
	s := l.GetState()
	a := &query.Activity{
		ActivityID:   l.GetActivityId(),
		RunID:        l.GetRunId(),
		ActivityType: s.GetActivityType().GetName(),
		TaskQueue:    s.GetTaskQueue(),
		Status:       info.GetStatus(),
	}
	if s.GetStatus() == activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED {
		a.WorkerInstanceKey = s.GetWorkerInstanceKey()
	}
	if t := s.GetScheduleTime(); t != nil {
		a.StartTime = t.AsTime()
	}
	if t := s.GetCloseTime(); t != nil {
		a.CloseTime = t.AsTime()
	}
	if fields := s.GetSearchAttributes().GetIndexedFields(); len(fields) > 0 && len(ns.SearchAttributes) > 0 {
		a.SearchAttributes = make(map[string]any, len(fields))
		for name, p := range fields {
			// Read as the attribute is registered now: a value stored under a type since
			// removed and registered again differently is NULL to queries.
			if t, ok := ns.SearchAttributes[name]; ok {
				if v, err := searchattr.Decode(p, t); err == nil && v != nil {
					a.SearchAttributes[name] = v
				}
			}
		}
	}
	return a
}

func activityListInfo(l *activitypb.ListedActivity, info *activityv1.ActivityExecutionInfo) *activityv1.ActivityExecutionListInfo {
	return &activityv1.ActivityExecutionListInfo{
		ActivityId:        l.GetActivityId(),
		RunId:             l.GetRunId(),
		ActivityType:      info.GetActivityType(),
		ScheduleTime:      info.GetScheduleTime(),
		CloseTime:         info.GetCloseTime(),
		Status:            info.GetStatus(),
		TaskQueue:         info.GetTaskQueue(),
		ExecutionDuration: info.GetExecutionDuration(),
		ExecutionTime:     info.GetScheduleTime(),
		SearchAttributes:  searchAttributesOf(l.GetState()),
	}
}

// searchAttributesOf is an activity's search attributes as Describe and List return them:
// what the start request set, each value stamped with its type. Never nil: the SDK reads its
// fields without a nil check.
func searchAttributesOf(s *activitypb.ActivityState) *commonpb.SearchAttributes {
	if sa := s.GetSearchAttributes(); sa != nil {
		return sa
	}
	return &commonpb.SearchAttributes{}
}

// ListActivityExecutions lists the namespace's standalone activities (every run, open and
// closed) that match the query, in the syntax of ListWorkers (query.ParseActivities). Pages
// are filled the way ListWorkers fills them: history is asked for exactly what is missing and
// each of its pages is consumed whole, so no activity is skipped or repeated.
func (h *WorkflowHandler) ListActivityExecutions(ctx context.Context, req *workflowservice.ListActivityExecutionsRequest) (*workflowservice.ListActivityExecutionsResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	q, err := parseActivityQuery(ns, req.GetQuery())
	if err != nil {
		return nil, err
	}
	if q.GroupedByStatus() {
		return nil, serviceerror.NewInvalidArgument("GROUP BY is only supported by CountActivityExecutions")
	}
	pageSize := int(req.GetPageSize())
	if pageSize <= 0 {
		pageSize = ListActivitiesPageSizeDefault
	}
	pageSize = min(pageSize, ListActivitiesPageSizeMax)
	fp := fingerprint("ListActivityExecutions", ns.ID, req.GetQuery())
	token, err := decodePageToken(req.GetNextPageToken(), fp)
	if err != nil {
		return nil, err
	}
	if q.Ordered() {
		return h.listActivitiesOrdered(ctx, ns, q, pageSize, fp, token)
	}
	resp := &workflowservice.ListActivityExecutionsResponse{}
	historyToken := token.History
	for range ListActivitiesMaxHistoryPages {
		page, err := h.deps.History.ListActivities(ctx, indexedListRequest(ns, q.IndexFilter(), pageSize-len(resp.Executions), historyToken))
		if err != nil {
			return nil, err
		}
		for _, l := range page.GetActivities() {
			info := activity.ToActivityExecutionInfo(l.GetActivityId(), l.GetRunId(), l.GetState())
			if q.MatchesActivity(queryActivity(ns, l, info)) {
				resp.Executions = append(resp.Executions, activityListInfo(l, info))
			}
		}
		historyToken = page.GetNextPageToken()
		if len(historyToken) == 0 || len(resp.Executions) >= pageSize {
			break
		}
	}
	if len(historyToken) > 0 {
		resp.NextPageToken = encodePageToken(pageToken{Fingerprint: fp, History: historyToken})
	}
	return resp, nil
}

// CountActivityExecutions counts what ListActivityExecutions would list for the same query;
// with GROUP BY ExecutionStatus, also how many of each status (groups in the order of the
// status enum, empty ones left out), as Temporal answers it. ORDER BY changes nothing here.
func (h *WorkflowHandler) CountActivityExecutions(ctx context.Context, req *workflowservice.CountActivityExecutionsRequest) (*workflowservice.CountActivityExecutionsResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	q, err := parseActivityQuery(ns, req.GetQuery())
	if err != nil {
		return nil, err
	}
	var count int64
	byStatus := map[enumspb.ActivityExecutionStatus]int64{}
	err = scanActivitiesIndexed(ctx, h.deps.History, ns, q.IndexFilter(), func(l *activitypb.ListedActivity) {
		info := activity.ToActivityExecutionInfo(l.GetActivityId(), l.GetRunId(), l.GetState())
		if q.MatchesActivity(queryActivity(ns, l, info)) {
			count++
			byStatus[info.GetStatus()]++
		}
	})
	if err != nil {
		return nil, err
	}
	resp := &workflowservice.CountActivityExecutionsResponse{Count: count}
	if q.GroupedByStatus() {
		for _, st := range slices.Sorted(maps.Keys(byStatus)) {
			resp.Groups = append(resp.Groups, &workflowservice.CountActivityExecutionsResponse_AggregationGroup{
				GroupValues: []*commonpb.Payload{keywordPayload(query.ActivityStatusName(st))},
				Count:       byStatus[st],
			})
		}
	}
	return resp, nil
}

// keywordPayload encodes a Keyword value as Temporal's visibility returns it.
func keywordPayload(s string) *commonpb.Payload {
	data, _ := json.Marshal(s) // a string always marshals
	return &commonpb.Payload{
		Metadata: map[string][]byte{"encoding": []byte("json/plain"), "type": []byte(enumspb.INDEXED_VALUE_TYPE_KEYWORD.String())},
		Data:     data,
	}
}

// listActivitiesOrdered answers a ListActivityExecutions with ORDER BY: every activity of the
// namespace is read and the matches sorted, and the page is taken by its position in that
// order (the token holds the position). Without ORDER BY a page costs what it returns; with
// it, a page costs a scan of the namespace, as CountActivityExecutions does. Activities
// started or closed between two pages' calls can shift the positions.
func (h *WorkflowHandler) listActivitiesOrdered(ctx context.Context, ns *namespace.Namespace, q *query.Query, pageSize int, fp uint64, token pageToken) (*workflowservice.ListActivityExecutionsResponse, error) {
	offset := 0
	if token.After != "" {
		n, err := strconv.Atoi(token.After)
		if err != nil || n < 0 {
			return nil, serviceerror.NewInvalidArgument("next_page_token is malformed")
		}
		offset = n
	}
	type match struct {
		row  *query.Activity
		info *activityv1.ActivityExecutionListInfo
	}
	var matches []match
	err := scanActivitiesIndexed(ctx, h.deps.History, ns, q.IndexFilter(), func(l *activitypb.ListedActivity) {
		info := activity.ToActivityExecutionInfo(l.GetActivityId(), l.GetRunId(), l.GetState())
		if row := queryActivity(ns, l, info); q.MatchesActivity(row) {
			matches = append(matches, match{row: row, info: activityListInfo(l, info)})
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(matches, func(a, b match) int { return q.CompareActivities(a.row, b.row) })
	resp := &workflowservice.ListActivityExecutionsResponse{}
	end := min(offset+pageSize, len(matches))
	for i := offset; i < end; i++ {
		resp.Executions = append(resp.Executions, matches[i].info)
	}
	if end < len(matches) {
		resp.NextPageToken = encodePageToken(pageToken{Fingerprint: fp, After: strconv.Itoa(end)})
	}
	return resp, nil
}

func scanActivities(ctx context.Context, history HistoryClient, ns *namespace.Namespace, fn func(*activitypb.ListedActivity)) error {
	return scanActivitiesIndexed(ctx, history, ns, query.ActivityIndexFilter{}, fn)
}

// scanActivitiesIndexed reads every activity the index filter selects.
func scanActivitiesIndexed(ctx context.Context, history HistoryClient, ns *namespace.Namespace, filter query.ActivityIndexFilter, fn func(*activitypb.ListedActivity)) error {
	var token []byte
	for {
		page, err := history.ListActivities(ctx, indexedListRequest(ns, filter, countActivitiesHistoryPageSize, token))
		if err != nil {
			return err
		}
		for _, l := range page.GetActivities() {
			fn(l)
		}
		if token = page.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}

// indexedListRequest asks history for a page of what the index filter selects: the task queue,
// and a closed status (each is one stored status; Running is several, so it is left to the
// query).
func indexedListRequest(ns *namespace.Namespace, filter query.ActivityIndexFilter, pageSize int, token []byte) *activitypb.ListActivitiesRequest {
	req := &activitypb.ListActivitiesRequest{
		NamespaceId: ns.ID, TaskQueue: filter.TaskQueue, PageSize: int32(pageSize), NextPageToken: token,
	}
	switch filter.Status {
	case enumspb.ACTIVITY_EXECUTION_STATUS_COMPLETED:
		req.Status = activitypb.ActivityStatus_ACTIVITY_STATUS_COMPLETED
	case enumspb.ACTIVITY_EXECUTION_STATUS_FAILED:
		req.Status = activitypb.ActivityStatus_ACTIVITY_STATUS_FAILED
	case enumspb.ACTIVITY_EXECUTION_STATUS_CANCELED:
		req.Status = activitypb.ActivityStatus_ACTIVITY_STATUS_CANCELED
	case enumspb.ACTIVITY_EXECUTION_STATUS_TIMED_OUT:
		req.Status = activitypb.ActivityStatus_ACTIVITY_STATUS_TIMED_OUT
	case enumspb.ACTIVITY_EXECUTION_STATUS_TERMINATED:
		req.Status = activitypb.ActivityStatus_ACTIVITY_STATUS_TERMINATED
	}
	return req
}

// TerminateActivityExecution closes a running standalone activity as TERMINATED at once: its
// running attempt is fenced (a late completion is refused), unbound from its worker, and the
// worker is sent a CancelActivity command. Repeating it is a success; an activity that closed
// otherwise is FailedPrecondition.
func (h *WorkflowHandler) TerminateActivityExecution(ctx context.Context, req *workflowservice.TerminateActivityExecutionRequest) (*workflowservice.TerminateActivityExecutionResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	_, err = h.deps.History.TerminateActivity(ctx, &activitypb.TerminateActivityRequest{
		NamespaceId: ns.ID, ActivityId: req.GetActivityId(), RunId: req.GetRunId(),
		Reason: req.GetReason(), Identity: req.GetIdentity(),
	})
	if err != nil {
		return nil, err
	}
	return &workflowservice.TerminateActivityExecutionResponse{}, nil
}

// DeleteActivityExecution deletes a closed standalone activity run; a running one is
// FailedPrecondition (terminate or cancel it first).
func (h *WorkflowHandler) DeleteActivityExecution(ctx context.Context, req *workflowservice.DeleteActivityExecutionRequest) (*workflowservice.DeleteActivityExecutionResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	_, err = h.deps.History.DeleteActivity(ctx, &activitypb.DeleteActivityRequest{
		NamespaceId: ns.ID, ActivityId: req.GetActivityId(), RunId: req.GetRunId(),
	})
	if err != nil {
		return nil, err
	}
	return &workflowservice.DeleteActivityExecutionResponse{}, nil
}
