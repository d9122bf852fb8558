package chasmtest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/vigilhq/vigil/chasm"
)

var _ chasm.Lister = (*Engine)(nil)

type listCursor struct {
	BusinessID string `json:"b"`
	RunID      string `json:"r"`
}

// ListExecutions implements chasm.Lister with the durable engine's ordering and paging.
func (e *Engine) ListExecutions(_ context.Context, req chasm.ListRequest) (*chasm.ListResponse, error) {
	if req.PageSize <= 0 {
		return nil, fmt.Errorf("chasmtest: page size must be positive")
	}
	var after *listCursor
	if len(req.NextPageToken) > 0 {
		after = &listCursor{}
		if err := json.Unmarshal(req.NextPageToken, after); err != nil {
			return nil, fmt.Errorf("chasmtest: bad page token: %w", err)
		}
	}
	matches := e.matching(req)
	resp := &chasm.ListResponse{}
	for _, m := range matches {
		if after != nil && cmp.Or(cmp.Compare(m.Key.BusinessID, after.BusinessID), cmp.Compare(m.Key.RunID, after.RunID)) <= 0 {
			continue
		}
		if len(resp.Executions) == req.PageSize {
			last := resp.Executions[len(resp.Executions)-1].Key
			resp.NextPageToken, _ = json.Marshal(listCursor{BusinessID: last.BusinessID, RunID: last.RunID})
			break
		}
		resp.Executions = append(resp.Executions, m)
	}
	return resp, nil
}

// CountExecutions implements chasm.Lister.
func (e *Engine) CountExecutions(_ context.Context, req chasm.ListRequest) (int64, error) {
	return int64(len(e.matching(req))), nil
}

func (e *Engine) matching(req chasm.ListRequest) []chasm.ListedExecution {
	e.mu.Lock()
	var slots []*slot
	for key, s := range e.slots {
		if key.archetype == req.Archetype && key.namespaceID == req.NamespaceID {
			slots = append(slots, s)
		}
	}
	e.mu.Unlock()

	var out []chasm.ListedExecution
	for _, s := range slots {
		s.mu.Lock()
		for _, exec := range s.runs {
			indexed := exec.Indexed()
			if (req.Filter.Status != "" && indexed.Status != req.Filter.Status) ||
				(req.Filter.TaskQueue != "" && indexed.TaskQueue != req.Filter.TaskQueue) {
				continue
			}
			_ = exec.Read(e.clock.Now(), func(_ chasm.Context, c chasm.Component) error {
				out = append(out, chasm.ListedExecution{Key: exec.Key(), Component: c})
				return nil
			})
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b chasm.ListedExecution) int {
		return cmp.Or(cmp.Compare(a.Key.BusinessID, b.Key.BusinessID), cmp.Compare(a.Key.RunID, b.Key.RunID))
	})
	return out
}
