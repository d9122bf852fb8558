package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

var _ persistence.SecurityStore = (*Store)(nil)

const apiKeyColumns = `id, key_hash, namespace, roles, description, create_time, revoke_time`

// CreateAPIKey implements persistence.SecurityStore.
func (s *Store) CreateAPIKey(ctx context.Context, key persistence.APIKeyRecord) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO api_keys (`+apiKeyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		key.ID, key.Hash, key.Namespace, key.Roles, key.Description, sqlcommon.OptionalTime(key.CreateTime), sqlcommon.OptionalTime(key.RevokeTime))
	if err != nil {
		if pgErr, ok := statementError(err); ok && pgErr.Code == sqlstateUniqueViolation {
			return &persistence.AlreadyExistsError{Msg: fmt.Sprintf("api key %q already exists", key.ID)}
		}
		return fmt.Errorf("postgres: create api key: %w", err)
	}
	return nil
}

// GetAPIKeyByHash implements persistence.SecurityStore.
func (s *Store) GetAPIKeyByHash(ctx context.Context, hash []byte) (*persistence.APIKeyRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE key_hash = $1`, hash)
	if err != nil {
		return nil, fmt.Errorf("postgres: get api key: %w", err)
	}
	keys, err := scanAPIKeys(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: get api key: %w", err)
	}
	if len(keys) == 0 {
		return nil, &persistence.NotFoundError{Msg: "api key not found"}
	}
	return keys[0], nil
}

// ListAPIKeys implements persistence.SecurityStore.
func (s *Store) ListAPIKeys(ctx context.Context, namespace string) ([]*persistence.APIKeyRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE $1 = '' OR namespace = $1 ORDER BY id`, namespace)
	if err != nil {
		return nil, fmt.Errorf("postgres: list api keys: %w", err)
	}
	keys, err := scanAPIKeys(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: list api keys: %w", err)
	}
	return keys, nil
}

// RevokeAPIKey implements persistence.SecurityStore.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, revokeTime time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoke_time = CASE WHEN revoke_time = 0 THEN $1 ELSE revoke_time END
		WHERE id = $2`, sqlcommon.OptionalTime(revokeTime), id)
	if err != nil {
		return fmt.Errorf("postgres: revoke api key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return &persistence.NotFoundError{Msg: fmt.Sprintf("api key %q not found", id)}
	}
	return nil
}

// AddClusterKey implements persistence.SecurityStore.
func (s *Store) AddClusterKey(ctx context.Context, key persistence.ClusterKey) error {
	if len(key.Secret) == 0 {
		return errors.New("postgres: add cluster key: empty secret")
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO cluster_keys (version, secret, create_time) VALUES ($1, $2, $3)
		ON CONFLICT (version) DO NOTHING`, key.Version, key.Secret, sqlcommon.OptionalTime(key.CreateTime)); err != nil {
		return fmt.Errorf("postgres: add cluster key: %w", err)
	}
	return nil
}

// ListClusterKeys implements persistence.SecurityStore.
func (s *Store) ListClusterKeys(ctx context.Context) ([]persistence.ClusterKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT version, secret, create_time FROM cluster_keys ORDER BY version DESC`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list cluster keys: %w", err)
	}
	defer rows.Close()
	var out []persistence.ClusterKey
	for rows.Next() {
		var k persistence.ClusterKey
		var created int64
		if err := rows.Scan(&k.Version, &k.Secret, &created); err != nil {
			return nil, fmt.Errorf("postgres: list cluster keys: %w", err)
		}
		k.CreateTime = sqlcommon.FromOptionalTime(created)
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list cluster keys: %w", err)
	}
	return out, nil
}

func scanAPIKeys(rows pgx.Rows) ([]*persistence.APIKeyRecord, error) {
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
