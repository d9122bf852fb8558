package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/fx"
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
			logger.Warn("authentication is off and the server listens on a non-loopback address: anyone who can reach it can do anything; enable auth (--auth, auth.enabled) and TLS (see docs/security.md)",
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

// taskTokenKeysReloadInterval is how soon the other hosts sign with a rotated key.
const taskTokenKeysReloadInterval = time.Minute

// taskTokenKeys keeps the signer in step with the cluster keys in the store: loaded at start
// (the first created on the cluster's first start; hosts racing to create it agree on the
// stored one), reloaded every minute, and rotated through the AdminService.
type taskTokenKeys struct {
	store  persistence.Store
	signer *auth.TaskTokenSigner
	ts     clock.TimeSource
	logger *zap.Logger
	stop   chan struct{}
	done   chan struct{}
}

func newTaskTokenKeys(lc fx.Lifecycle, store persistence.Store, ts clock.TimeSource, logger *zap.Logger) (*taskTokenKeys, *auth.TaskTokenSigner, error) {
	k := &taskTokenKeys{store: store, ts: ts, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys, err := store.ListClusterKeys(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("load task-token keys: %w", err)
	}
	if len(keys) == 0 {
		if _, err := k.add(ctx, 1); err != nil {
			return nil, nil, err
		}
		if keys, err = store.ListClusterKeys(ctx); err != nil {
			return nil, nil, fmt.Errorf("load task-token keys: %w", err)
		}
	}
	if k.signer, err = auth.NewTaskTokenSigner(signingKeys(keys)); err != nil {
		return nil, nil, err
	}
	lc.Append(fx.StartStopHook(k.start, k.close))
	return k, k.signer, nil
}

func (k *taskTokenKeys) add(ctx context.Context, version int32) (int32, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return 0, err
	}
	if err := k.store.AddClusterKey(ctx, persistence.ClusterKey{Version: version, Secret: secret, CreateTime: k.ts.Now().UTC()}); err != nil {
		return 0, fmt.Errorf("create task-token key: %w", err)
	}
	return version, nil
}

// RotateTaskTokenKey adds the next key version and signs with it on this host at once.
func (k *taskTokenKeys) RotateTaskTokenKey(ctx context.Context) (int32, error) {
	keys, err := k.store.ListClusterKeys(ctx)
	if err != nil {
		return 0, err
	}
	next := int32(1)
	if len(keys) > 0 {
		next = keys[0].Version + 1
	}
	if _, err := k.add(ctx, next); err != nil {
		return 0, err
	}
	if err := k.reload(ctx); err != nil {
		return 0, err
	}
	return k.signer.SigningVersion(), nil
}

func (k *taskTokenKeys) reload(ctx context.Context) error {
	keys, err := k.store.ListClusterKeys(ctx)
	if err != nil {
		return err
	}
	return k.signer.SetKeys(signingKeys(keys))
}

func (k *taskTokenKeys) start() {
	go func() {
		defer close(k.done)
		ticker := time.NewTicker(taskTokenKeysReloadInterval)
		defer ticker.Stop()
		for {
			select {
			case <-k.stop:
				return
			case <-ticker.C:
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := k.reload(ctx); err != nil {
					k.logger.Warn("reload task-token keys; keeping the current ones", zap.Error(err))
				}
				cancel()
			}
		}
	}()
}

func (k *taskTokenKeys) close() {
	close(k.stop)
	<-k.done
}

func signingKeys(keys []persistence.ClusterKey) []auth.SigningKey {
	out := make([]auth.SigningKey, 0, len(keys))
	for _, k := range keys {
		out = append(out, auth.SigningKey{Version: k.Version, Secret: k.Secret})
	}
	return out
}
