package chasm

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/common/visibility"
)

// ListRequest selects a page of the executions of one archetype in a namespace, every run
// included, ordered by (BusinessID, RunID).
type ListRequest struct {
	Archetype   string
	NamespaceID string
	// Filter matches IndexedFields by equality; empty fields match anything.
	Filter IndexedFields
	// Visibility, when set, selects and orders by the visibility records instead (Filter must
	// be empty; see VisibilityLister); NextPageToken is then a position in its order.
	Visibility    *visibility.Query
	PageSize      int
	NextPageToken []byte
}

// ListedExecution is one listed execution with a read-only view of its root component.
type ListedExecution struct {
	Key       ExecutionKey
	Component Component
}

// ListResponse is a page of executions; NextPageToken is nil on the last page.
type ListResponse struct {
	Executions    []ListedExecution
	NextPageToken []byte
}

// Lister lists and counts executions. Both engines implement it; listing reads committed state
// and never takes execution locks.
type Lister interface {
	ListExecutions(ctx context.Context, req ListRequest) (*ListResponse, error)
	CountExecutions(ctx context.Context, req ListRequest) (int64, error)
}

// VisibilityLister is a Lister that answers visibility queries (ListRequest.Visibility), over
// the records of VisibilityComponents.
type VisibilityLister interface {
	Lister
	// CountVisibility counts the executions whose record matches req.Visibility, in all and by
	// record status.
	CountVisibility(ctx context.Context, req ListRequest) (total int64, byStatus map[int32]int64, err error)
}

// DecodeComponent builds a read-only component view from persisted state, for listing.
func (c *RegistrableComponent) DecodeComponent(state []byte) (Component, error) {
	msg := c.newState()
	if err := proto.Unmarshal(state, msg); err != nil {
		return nil, fmt.Errorf("chasm: decode %s state: %w", c.fullName, err)
	}
	return c.fromState(msg), nil
}

// Listed is a typed ListedExecution.
type Listed[C Component] struct {
	Key       ExecutionKey
	Component C
}

// ListComponents lists executions rooted at C.
func ListComponents[C Component](
	ctx context.Context, l Lister, r *Registry, namespaceID string, filter IndexedFields, pageSize int, token []byte,
) ([]Listed[C], []byte, error) {
	return ListComponentsOf[C](ctx, l, r, ListRequest{NamespaceID: namespaceID, Filter: filter, PageSize: pageSize, NextPageToken: token})
}

// ListComponentsOf lists executions rooted at C as req selects them (its Archetype is C's).
func ListComponentsOf[C Component](ctx context.Context, l Lister, r *Registry, req ListRequest) ([]Listed[C], []byte, error) {
	archetype, err := ArchetypeOf[C](r)
	if err != nil {
		return nil, nil, err
	}
	req.Archetype = archetype
	resp, err := l.ListExecutions(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Listed[C], 0, len(resp.Executions))
	for _, e := range resp.Executions {
		c, err := assertComponent[C](e.Component)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, Listed[C]{Key: e.Key, Component: c})
	}
	return out, resp.NextPageToken, nil
}
