package chasm

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// ListRequest selects a page of the executions of one archetype in a namespace, every run
// included, ordered by (BusinessID, RunID).
type ListRequest struct {
	Archetype   string
	NamespaceID string
	// Filter matches IndexedFields by equality; empty fields match anything.
	Filter        IndexedFields
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
	archetype, err := ArchetypeOf[C](r)
	if err != nil {
		return nil, nil, err
	}
	resp, err := l.ListExecutions(ctx, ListRequest{
		Archetype: archetype, NamespaceID: namespaceID, Filter: filter, PageSize: pageSize, NextPageToken: token,
	})
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
