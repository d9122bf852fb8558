package persistence

import (
	"context"
	"time"
)

// NamespaceStore keeps the cluster's namespaces: those created at run time (RegisterNamespace)
// and those the static configuration declares (created at start when missing). Every host of a
// cluster reads the same rows, so a namespace created through one host is known to all. The
// store keeps a namespace's settings as an opaque blob (the frontend's namespace package
// encodes it) and a version for optimistic concurrency.
type NamespaceStore interface {
	// CreateNamespace stores a new namespace with Version 1. It fails with
	// *AlreadyExistsError if the name or the ID is taken.
	CreateNamespace(ctx context.Context, ns NamespaceRecord) error
	// UpdateNamespace replaces the Data and UpdateTime of the namespace called ns.Name and
	// stores ns.Version, if the stored version is ns.Version-1. A missing name is a
	// *NotFoundError; another stored version is a *NamespaceVersionConflictError.
	UpdateNamespace(ctx context.Context, ns NamespaceRecord) error
	// GetNamespace returns the namespace called name, or a *NotFoundError.
	GetNamespace(ctx context.Context, name string) (*NamespaceRecord, error)
	// ListNamespaces returns every namespace, ordered by name.
	ListNamespaces(ctx context.Context) ([]*NamespaceRecord, error)
	// RenameNamespace gives the namespace called from the name ns.Name, with ns.Data,
	// ns.UpdateTime and ns.Version, if its stored version is ns.Version-1 (DeleteNamespace
	// frees the name this way). A missing namespace is a *NotFoundError, another stored version
	// a *NamespaceVersionConflictError, a taken ns.Name an *AlreadyExistsError.
	RenameNamespace(ctx context.Context, from string, ns NamespaceRecord) error
	// DeleteNamespace removes the namespace called name with the given ID. Removing one that is
	// not stored does nothing.
	DeleteNamespace(ctx context.Context, name, id string) error
}

// NamespaceRecord is a stored namespace.
type NamespaceRecord struct {
	ID   string
	Name string
	// Data is the namespace's settings, encoded by the caller.
	Data       []byte
	Version    int64
	CreateTime time.Time
	UpdateTime time.Time
}

// NamespaceVersionConflictError reports an update of a namespace that changed since it was read.
type NamespaceVersionConflictError struct {
	Name            string
	ExpectedVersion int64
}

func (e *NamespaceVersionConflictError) Error() string {
	return "namespace " + e.Name + " changed concurrently: retry the update"
}
