package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

var _ persistence.NamespaceStore = (*Store)(nil)

// CreateNamespace implements persistence.NamespaceStore.
func (s *Store) CreateNamespace(ctx context.Context, ns persistence.NamespaceRecord) error {
	if ns.Name == "" || ns.ID == "" {
		return errors.New("sqlite: create namespace: name and id are required")
	}
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO namespaces (`+sqlcommon.NamespaceColumns+`) VALUES (?, ?, ?, 1, ?, ?)`,
			ns.Name, ns.ID, nonNil(ns.Data), sqlcommon.OptionalTime(ns.CreateTime), sqlcommon.OptionalTime(ns.UpdateTime))
		return err
	})
	if err != nil {
		if isConstraint(err) {
			return &persistence.AlreadyExistsError{Msg: fmt.Sprintf("namespace %q (id %s) already exists", ns.Name, ns.ID)}
		}
		return fmt.Errorf("sqlite: create namespace: %w", err)
	}
	return nil
}

// UpdateNamespace implements persistence.NamespaceStore.
func (s *Store) UpdateNamespace(ctx context.Context, ns persistence.NamespaceRecord) error {
	var found bool
	var stored int64
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT version FROM namespaces WHERE name = ?`, ns.Name).Scan(&stored)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		if stored != ns.Version-1 {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE namespaces SET data = ?, version = ?, update_time = ? WHERE name = ?`,
			nonNil(ns.Data), ns.Version, sqlcommon.OptionalTime(ns.UpdateTime), ns.Name)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("sqlite: update namespace: %w", err)
	case !found:
		return &persistence.NotFoundError{Msg: fmt.Sprintf("namespace %q not found", ns.Name)}
	case stored != ns.Version-1:
		return &persistence.NamespaceVersionConflictError{Name: ns.Name, ExpectedVersion: ns.Version - 1}
	}
	return nil
}

// RenameNamespace implements persistence.NamespaceStore.
func (s *Store) RenameNamespace(ctx context.Context, from string, ns persistence.NamespaceRecord) error {
	var found bool
	var stored int64
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT version FROM namespaces WHERE name = ?`, from).Scan(&stored)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		if stored != ns.Version-1 {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE namespaces SET name = ?, data = ?, version = ?, update_time = ? WHERE name = ?`,
			ns.Name, nonNil(ns.Data), ns.Version, sqlcommon.OptionalTime(ns.UpdateTime), from)
		return err
	})
	switch {
	case err != nil && isConstraint(err):
		return &persistence.AlreadyExistsError{Msg: fmt.Sprintf("namespace %q already exists", ns.Name)}
	case err != nil:
		return fmt.Errorf("sqlite: rename namespace: %w", err)
	case !found:
		return &persistence.NotFoundError{Msg: fmt.Sprintf("namespace %q not found", from)}
	case stored != ns.Version-1:
		return &persistence.NamespaceVersionConflictError{Name: from, ExpectedVersion: ns.Version - 1}
	}
	return nil
}

// DeleteNamespace implements persistence.NamespaceStore.
func (s *Store) DeleteNamespace(ctx context.Context, name, id string) error {
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM namespaces WHERE name = ? AND id = ?`, name, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete namespace: %w", err)
	}
	return nil
}

// GetNamespace implements persistence.NamespaceStore.
func (s *Store) GetNamespace(ctx context.Context, name string) (*persistence.NamespaceRecord, error) {
	rows, err := s.readDB.QueryContext(ctx, `SELECT `+sqlcommon.NamespaceColumns+` FROM namespaces WHERE name = ?`, name)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get namespace: %w", err)
	}
	out, err := scanNamespaces(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get namespace: %w", err)
	}
	if len(out) == 0 {
		return nil, &persistence.NotFoundError{Msg: fmt.Sprintf("namespace %q not found", name)}
	}
	return out[0], nil
}

// ListNamespaces implements persistence.NamespaceStore.
func (s *Store) ListNamespaces(ctx context.Context) ([]*persistence.NamespaceRecord, error) {
	rows, err := s.readDB.QueryContext(ctx, `SELECT `+sqlcommon.NamespaceColumns+` FROM namespaces ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list namespaces: %w", err)
	}
	out, err := scanNamespaces(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list namespaces: %w", err)
	}
	return out, nil
}

func scanNamespaces(rows *sql.Rows) ([]*persistence.NamespaceRecord, error) {
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

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
