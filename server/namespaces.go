package server

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/persistence"
)

// namespaceModule keeps the namespace registry in the store: the configured namespaces are
// created there at start when missing, RegisterNamespace and UpdateNamespace write there, and
// every host follows it. It starts before the activity module, whose start-up scan reads the
// registry's namespaces.
func namespaceModule(namespaces *namespace.Registry) fx.Option {
	return fx.Invoke(func(lc fx.Lifecycle, store persistence.Store, ts clock.TimeSource, logger *zap.Logger) {
		namespaces.AttachStore(namespaceStore{store: store}, namespace.StoreOptions{TimeSource: ts, Logger: logger})
		lc.Append(fx.Hook{
			OnStart: func(ctx context.Context) error {
				if err := namespaces.Start(ctx); err != nil {
					return fmt.Errorf("namespaces: %w", err)
				}
				return nil
			},
			OnStop: func(context.Context) error { namespaces.Stop(); return nil },
		})
	})
}

// namespaceStore adapts persistence.NamespaceStore to namespace.Store.
type namespaceStore struct{ store persistence.NamespaceStore }

func (s namespaceStore) Create(ctx context.Context, ns namespace.StoredNamespace) error {
	return namespaceError(s.store.CreateNamespace(ctx, persistence.NamespaceRecord(ns)))
}

func (s namespaceStore) Update(ctx context.Context, ns namespace.StoredNamespace) error {
	return namespaceError(s.store.UpdateNamespace(ctx, persistence.NamespaceRecord(ns)))
}

func (s namespaceStore) Rename(ctx context.Context, from string, ns namespace.StoredNamespace) error {
	return namespaceError(s.store.RenameNamespace(ctx, from, persistence.NamespaceRecord(ns)))
}

func (s namespaceStore) Delete(ctx context.Context, name, id string) error {
	return namespaceError(s.store.DeleteNamespace(ctx, name, id))
}

func (s namespaceStore) Get(ctx context.Context, name string) (namespace.StoredNamespace, error) {
	r, err := s.store.GetNamespace(ctx, name)
	if err != nil {
		return namespace.StoredNamespace{}, namespaceError(err)
	}
	return namespace.StoredNamespace(*r), nil
}

func (s namespaceStore) List(ctx context.Context) ([]namespace.StoredNamespace, error) {
	records, err := s.store.ListNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]namespace.StoredNamespace, len(records))
	for i, r := range records {
		out[i] = namespace.StoredNamespace(*r)
	}
	return out, nil
}

func namespaceError(err error) error {
	var (
		notFound *persistence.NotFoundError
		exists   *persistence.AlreadyExistsError
		conflict *persistence.NamespaceVersionConflictError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &notFound):
		return fmt.Errorf("%w: %v", namespace.ErrNotFound, err)
	case errors.As(err, &exists):
		return fmt.Errorf("%w: %v", namespace.ErrAlreadyExists, err)
	case errors.As(err, &conflict):
		return fmt.Errorf("%w: %v", namespace.ErrVersionConflict, err)
	}
	return err
}
