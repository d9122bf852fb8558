package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

var _ persistence.NamespaceStore = (*Store)(nil)

// CreateNamespace implements persistence.NamespaceStore.
func (s *Store) CreateNamespace(ctx context.Context, ns persistence.NamespaceRecord) error {
	if ns.Name == "" || ns.ID == "" {
		return errors.New("postgres: create namespace: name and id are required")
	}
	data := ns.Data
	if data == nil {
		data = []byte{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO namespaces (`+sqlcommon.NamespaceColumns+`) VALUES ($1, $2, $3, 1, $4, $5)`,
		ns.Name, ns.ID, data, sqlcommon.OptionalTime(ns.CreateTime), sqlcommon.OptionalTime(ns.UpdateTime))
	if err != nil {
		if pgErr, ok := statementError(err); ok && pgErr.Code == sqlstateUniqueViolation {
			return &persistence.AlreadyExistsError{Msg: fmt.Sprintf("namespace %q (id %s) already exists", ns.Name, ns.ID)}
		}
		return fmt.Errorf("postgres: create namespace: %w", err)
	}
	return nil
}

// UpdateNamespace implements persistence.NamespaceStore. One conditional UPDATE: it applies
// only over the expected version, and when it does not, a read tells a missing namespace from
// a concurrent update.
func (s *Store) UpdateNamespace(ctx context.Context, ns persistence.NamespaceRecord) error {
	data := ns.Data
	if data == nil {
		data = []byte{}
	}
	tag, err := s.pool.Exec(ctx, `UPDATE namespaces SET data = $1, version = $2, update_time = $3 WHERE name = $4 AND version = $5`,
		data, ns.Version, sqlcommon.OptionalTime(ns.UpdateTime), ns.Name, ns.Version-1)
	if err != nil {
		return fmt.Errorf("postgres: update namespace: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if _, err := s.GetNamespace(ctx, ns.Name); err != nil {
		return err
	}
	return &persistence.NamespaceVersionConflictError{Name: ns.Name, ExpectedVersion: ns.Version - 1}
}

// RenameNamespace implements persistence.NamespaceStore, like UpdateNamespace.
func (s *Store) RenameNamespace(ctx context.Context, from string, ns persistence.NamespaceRecord) error {
	data := ns.Data
	if data == nil {
		data = []byte{}
	}
	tag, err := s.pool.Exec(ctx, `UPDATE namespaces SET name = $1, data = $2, version = $3, update_time = $4 WHERE name = $5 AND version = $6`,
		ns.Name, data, ns.Version, sqlcommon.OptionalTime(ns.UpdateTime), from, ns.Version-1)
	if err != nil {
		if pgErr, ok := statementError(err); ok && pgErr.Code == sqlstateUniqueViolation {
			return &persistence.AlreadyExistsError{Msg: fmt.Sprintf("namespace %q already exists", ns.Name)}
		}
		return fmt.Errorf("postgres: rename namespace: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if _, err := s.GetNamespace(ctx, from); err != nil {
		return err
	}
	return &persistence.NamespaceVersionConflictError{Name: from, ExpectedVersion: ns.Version - 1}
}

// DeleteNamespace implements persistence.NamespaceStore.
func (s *Store) DeleteNamespace(ctx context.Context, name, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM namespaces WHERE name = $1 AND id = $2`, name, id); err != nil {
		return fmt.Errorf("postgres: delete namespace: %w", err)
	}
	return nil
}

// GetNamespace implements persistence.NamespaceStore.
func (s *Store) GetNamespace(ctx context.Context, name string) (*persistence.NamespaceRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sqlcommon.NamespaceColumns+` FROM namespaces WHERE name = $1`, name)
	if err != nil {
		return nil, fmt.Errorf("postgres: get namespace: %w", err)
	}
	out, err := scanNamespaces(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: get namespace: %w", err)
	}
	if len(out) == 0 {
		return nil, &persistence.NotFoundError{Msg: fmt.Sprintf("namespace %q not found", name)}
	}
	return out[0], nil
}

// ListNamespaces implements persistence.NamespaceStore.
func (s *Store) ListNamespaces(ctx context.Context) ([]*persistence.NamespaceRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sqlcommon.NamespaceColumns+` FROM namespaces ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list namespaces: %w", err)
	}
	out, err := scanNamespaces(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: list namespaces: %w", err)
	}
	return out, nil
}

func scanNamespaces(rows pgx.Rows) ([]*persistence.NamespaceRecord, error) {
	defer rows.Close()
	var out []*persistence.NamespaceRecord
	for rows.Next() {
		ns, err := sqlcommon.ScanNamespace(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, ns)
	}
	return out, rows.Err()
}
