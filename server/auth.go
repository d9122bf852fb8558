package server

import (
	"context"
	"errors"
	"net"
	"time"

	"go.uber.org/zap"

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
