package persistence

import (
	"context"
	"time"
)

// SecurityStore keeps the cluster's credentials: API keys (only their hashes) and the keys
// that sign task tokens. It is small and read often; backends serve it from indexed tables.
type SecurityStore interface {
	// CreateAPIKey stores a new key. It fails with *AlreadyExistsError if the ID or the hash is
	// taken.
	CreateAPIKey(ctx context.Context, key APIKeyRecord) error
	// GetAPIKeyByHash returns the key with this hash, revoked or not, or a *NotFoundError.
	GetAPIKeyByHash(ctx context.Context, hash []byte) (*APIKeyRecord, error)
	// ListAPIKeys returns every key, ordered by ID; namespace non-empty keeps that namespace's.
	ListAPIKeys(ctx context.Context, namespace string) ([]*APIKeyRecord, error)
	// RevokeAPIKey marks the key revoked at revokeTime, or keeps the earlier revocation time if
	// it was revoked already. A missing ID is a *NotFoundError.
	RevokeAPIKey(ctx context.Context, id string, revokeTime time.Time) error

	// AddClusterKey stores a signing key under key.Version; adding a version that exists is a
	// no-op (the stored key wins), so hosts racing to create the first key agree on it.
	AddClusterKey(ctx context.Context, key ClusterKey) error
	// ListClusterKeys returns every signing key, newest version first.
	ListClusterKeys(ctx context.Context) ([]ClusterKey, error)
}

// APIKeyRecord is a stored API key. The key itself is never stored: Hash is its SHA-256.
type APIKeyRecord struct {
	ID          string
	Hash        []byte
	Namespace   string
	Roles       string
	Description string
	CreateTime  time.Time
	// RevokeTime is zero while the key is valid.
	RevokeTime time.Time
}

// ClusterKey is a secret the cluster signs with (task tokens). The newest version signs; every
// stored version verifies, so a rotation does not invalidate tokens already handed out.
type ClusterKey struct {
	Version    int32
	Secret     []byte
	CreateTime time.Time
}

// AlreadyExistsError reports a create of a row that exists.
type AlreadyExistsError struct {
	Msg string
}

func (e *AlreadyExistsError) Error() string { return e.Msg }
