package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

var _ persistence.SecurityStore = (*Store)(nil)

// CreateAPIKey implements persistence.SecurityStore.
func (s *Store) CreateAPIKey(ctx context.Context, key persistence.APIKeyRecord) error {
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, key_hash, namespace, roles, description, create_time, revoke_time)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			key.ID, key.Hash, key.Namespace, key.Roles, key.Description, sqlcommon.OptionalTime(key.CreateTime), sqlcommon.OptionalTime(key.RevokeTime))
		return err
	})
	if err != nil {
		if isConstraint(err) {
			return &persistence.AlreadyExistsError{Msg: fmt.Sprintf("api key %q already exists", key.ID)}
		}
		return fmt.Errorf("sqlite: create api key: %w", err)
	}
	return nil
}

// GetAPIKeyByHash implements persistence.SecurityStore.
func (s *Store) GetAPIKeyByHash(ctx context.Context, hash []byte) (*persistence.APIKeyRecord, error) {
	rows, err := s.readDB.QueryContext(ctx, `SELECT id, key_hash, namespace, roles, description, create_time, revoke_time
		FROM api_keys WHERE key_hash = ?`, hash)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get api key: %w", err)
	}
	keys, err := scanAPIKeys(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get api key: %w", err)
	}
	if len(keys) == 0 {
		return nil, &persistence.NotFoundError{Msg: "api key not found"}
	}
	return keys[0], nil
}

// ListAPIKeys implements persistence.SecurityStore.
func (s *Store) ListAPIKeys(ctx context.Context, namespace string) ([]*persistence.APIKeyRecord, error) {
	rows, err := s.readDB.QueryContext(ctx, `SELECT id, key_hash, namespace, roles, description, create_time, revoke_time
		FROM api_keys WHERE ? = '' OR namespace = ? ORDER BY id`, namespace, namespace)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list api keys: %w", err)
	}
	keys, err := scanAPIKeys(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list api keys: %w", err)
	}
	return keys, nil
}

// RevokeAPIKey implements persistence.SecurityStore.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, revokeTime time.Time) error {
	var n int64
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoke_time = CASE WHEN revoke_time = 0 THEN ? ELSE revoke_time END
			WHERE id = ?`, sqlcommon.OptionalTime(revokeTime), id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: revoke api key: %w", err)
	}
	if n == 0 {
		return &persistence.NotFoundError{Msg: fmt.Sprintf("api key %q not found", id)}
	}
	return nil
}

// AddClusterKey implements persistence.SecurityStore.
func (s *Store) AddClusterKey(ctx context.Context, key persistence.ClusterKey) error {
	if len(key.Secret) == 0 {
		return errors.New("sqlite: add cluster key: empty secret")
	}
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO cluster_keys (version, secret, create_time) VALUES (?, ?, ?)
			ON CONFLICT (version) DO NOTHING`, key.Version, key.Secret, sqlcommon.OptionalTime(key.CreateTime))
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: add cluster key: %w", err)
	}
	return nil
}

// ListClusterKeys implements persistence.SecurityStore.
func (s *Store) ListClusterKeys(ctx context.Context) ([]persistence.ClusterKey, error) {
	rows, err := s.readDB.QueryContext(ctx, `SELECT version, secret, create_time FROM cluster_keys ORDER BY version DESC`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list cluster keys: %w", err)
	}
	defer rows.Close()
	var out []persistence.ClusterKey
	for rows.Next() {
		var k persistence.ClusterKey
		var created int64
		if err := rows.Scan(&k.Version, &k.Secret, &created); err != nil {
			return nil, fmt.Errorf("sqlite: list cluster keys: %w", err)
		}
		k.CreateTime = sqlcommon.FromOptionalTime(created)
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list cluster keys: %w", err)
	}
	return out, nil
}

func scanAPIKeys(rows *sql.Rows) ([]*persistence.APIKeyRecord, error) {
	defer rows.Close()
	var out []*persistence.APIKeyRecord
	for rows.Next() {
		k, err := sqlcommon.ScanAPIKey(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}
