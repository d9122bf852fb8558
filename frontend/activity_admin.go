package frontend

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	activityv1 "go.temporal.io/api/activity/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/frontend/query"
)

// Page sizes of the standalone-activity listing.
const (
	// ListActivitiesPageSizeDefault is the page size of a ListActivityExecutions request that
	// names none.
	ListActivitiesPageSizeDefault = 100
	// ListActivitiesPageSizeMax caps the page size (larger requests are clamped).
	ListActivitiesPageSizeMax = 1000
	// countActivitiesHistoryPageSize is the page size of a scan of every activity.
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
		ExecutionTime:     info.GetExecutionTime(),
		SearchAttributes:  searchAttributesOf(l.GetState()),
		// The listing carries each run's stored state, so the count comes with it: no
		// visibility column is needed.
		StateTransitionCount: info.GetStateTransitionCount(),
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
// closed) that match the query, in its ORDER BY (by activity ID and run ID without one). The
// query is compiled to a visibility query that history's store runs against its visibility
// tables: the store filters, sorts and pages, so a page costs what its index walk costs, and
// the token is the position of the page's last activity in the order (no activity is skipped
// or repeated across pages, whatever changes between them, but for one whose ordered value
// changes meanwhile).
func (h *WorkflowHandler) ListActivityExecutions(ctx context.Context, req *workflowservice.ListActivityExecutionsRequest) (*workflowservice.ListActivityExecutionsResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	q, vq, err := parseActivityVisibility(ns, req.GetQuery())
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
	page, err := h.deps.History.ListActivities(ctx, &activitypb.ListActivitiesRequest{
		NamespaceId: ns.ID, VisibilityQuery: vq, PageSize: int32(pageSize), NextPageToken: token.History,
	})
	if err != nil {
		return nil, err
	}
	resp := &workflowservice.ListActivityExecutionsResponse{}
	for _, l := range page.GetActivities() {
		info := activity.ToActivityExecutionInfo(l.GetActivityId(), l.GetRunId(), l.GetState())
		resp.Executions = append(resp.Executions, activityListInfo(l, info))
	}
	if next := page.GetNextPageToken(); len(next) > 0 {
		resp.NextPageToken = encodePageToken(pageToken{Fingerprint: fp, History: next})
	}
	return resp, nil
}

// parseActivityVisibility parses an activity query and compiles it for the store.
func parseActivityVisibility(ns *namespace.Namespace, text string) (*query.Query, []byte, error) {
	q, err := parseActivityQuery(ns, text)
	if err != nil {
		return nil, nil, err
	}
	vq, err := q.Visibility()
	if err != nil {
		return nil, nil, serviceerror.NewInvalidArgument("invalid query: " + err.Error())
	}
	return q, vq.Encode(), nil
}

// CountActivityExecutions counts what ListActivityExecutions would list for the same query;
// with GROUP BY ExecutionStatus, also how many of each status (groups in the order of the
// status enum, empty ones left out), as Temporal answers it. ORDER BY changes nothing here.
// The store counts over its visibility tables.
func (h *WorkflowHandler) CountActivityExecutions(ctx context.Context, req *workflowservice.CountActivityExecutionsRequest) (*workflowservice.CountActivityExecutionsResponse, error) {
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	q, vq, err := parseActivityVisibility(ns, req.GetQuery())
	if err != nil {
		return nil, err
	}
	counted, err := h.deps.History.ListActivities(ctx, &activitypb.ListActivitiesRequest{
		NamespaceId: ns.ID, VisibilityQuery: vq, CountOnly: true,
	})
	if err != nil {
		return nil, err
	}
	resp := &workflowservice.CountActivityExecutionsResponse{Count: counted.GetCount()}
	if q.GroupedByStatus() {
		byStatus := counted.GetStatusCounts()
		for _, st := range slices.Sorted(maps.Keys(byStatus)) {
			if byStatus[st] == 0 {
				continue
			}
			resp.Groups = append(resp.Groups, &workflowservice.CountActivityExecutionsResponse_AggregationGroup{
				GroupValues: []*commonpb.Payload{keywordPayload(query.ActivityStatusName(enumspb.ActivityExecutionStatus(st)))},
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

// scanActivities reads every activity of the namespace, in pages of the store's key order.
func scanActivities(ctx context.Context, history HistoryClient, ns *namespace.Namespace, fn func(*activitypb.ListedActivity)) error {
	var token []byte
	for {
		page, err := history.ListActivities(ctx, &activitypb.ListActivitiesRequest{
			NamespaceId: ns.ID, PageSize: countActivitiesHistoryPageSize, NextPageToken: token})
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
