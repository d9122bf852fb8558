package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/persistence"
)

// apiKeyStore adapts the persistence store to the frontend's auth.APIKeyStore, so that the
// frontend never imports persistence.
type apiKeyStore struct{ store persistence.SecurityStore }

func (s apiKeyStore) CreateAPIKey(ctx context.Context, k auth.APIKey) error {
	return s.store.CreateAPIKey(ctx, persistence.APIKeyRecord{
		ID: k.ID, Hash: k.Hash, Namespace: k.Namespace, Roles: k.Roles.String(),
		Description: k.Description, CreateTime: k.CreateTime, RevokeTime: k.RevokeTime,
	})
}

func (s apiKeyStore) GetAPIKeyByHash(ctx context.Context, hash []byte) (*auth.APIKey, error) {
	rec, err := s.store.GetAPIKeyByHash(ctx, hash)
	var nf *persistence.NotFoundError
	if errors.As(err, &nf) {
		return nil, auth.ErrAPIKeyNotFound
	}
	if err != nil {
		return nil, err
	}
	return fromRecord(rec), nil
}

func (s apiKeyStore) ListAPIKeys(ctx context.Context, namespace string) ([]*auth.APIKey, error) {
	recs, err := s.store.ListAPIKeys(ctx, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]*auth.APIKey, 0, len(recs))
	for _, r := range recs {
		out = append(out, fromRecord(r))
	}
	return out, nil
}

func (s apiKeyStore) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	err := s.store.RevokeAPIKey(ctx, id, at)
	var nf *persistence.NotFoundError
	if errors.As(err, &nf) {
		return auth.ErrAPIKeyNotFound
	}
	return err
}

func fromRecord(r *persistence.APIKeyRecord) *auth.APIKey {
	// A stored role list that no longer parses grants nothing rather than failing the call.
	roles, _ := auth.ParseRoles(r.Roles)
	return &auth.APIKey{
		ID: r.ID, Hash: r.Hash, Namespace: r.Namespace, Roles: roles,
		Description: r.Description, CreateTime: r.CreateTime, RevokeTime: r.RevokeTime,
	}
}

// warnIfOpen logs a warning when auth is off and a listener accepts more than loopback
// connections: anyone who can reach the port can then do anything.
func warnIfOpen(logger *zap.Logger, authEnabled bool, addresses ...string) {
	if authEnabled {
		return
	}
	for _, addr := range addresses {
		if !isLoopback(addr) {
			logger.Warn("authentication is off and the server listens on a non-loopback address: anyone who can reach it can do anything; enable auth (--auth, auth.enabled) and TLS (see README, Securing vigil)",
				zap.String("address", addr))
		}
	}
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newTaskTokenSigner loads the cluster's task-token keys from the store, creating the first on
// the cluster's first start (hosts racing to create it agree on the stored one). Keys are read
// once at start: a key version added to the store signs after each host's restart, and every
// stored version keeps verifying.
func newTaskTokenSigner(store persistence.Store, ts clock.TimeSource) (*auth.TaskTokenSigner, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys, err := store.ListClusterKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("load task-token keys: %w", err)
	}
	if len(keys) == 0 {
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		if err := store.AddClusterKey(ctx, persistence.ClusterKey{Version: 1, Secret: secret, CreateTime: ts.Now().UTC()}); err != nil {
			return nil, fmt.Errorf("create task-token key: %w", err)
		}
		if keys, err = store.ListClusterKeys(ctx); err != nil {
			return nil, fmt.Errorf("load task-token keys: %w", err)
		}
	}
	signing := make([]auth.SigningKey, 0, len(keys))
	for _, k := range keys {
		signing = append(signing, auth.SigningKey{Version: k.Version, Secret: k.Secret})
	}
	return auth.NewTaskTokenSigner(signing)
}
