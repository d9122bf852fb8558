package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// memKeys is an in-memory APIKeyStore.
type memKeys struct {
	mu   sync.Mutex
	keys map[string]*APIKey // by hash
}

func (m *memKeys) CreateAPIKey(_ context.Context, k APIKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil {
		m.keys = map[string]*APIKey{}
	}
	m.keys[string(k.Hash)] = &k
	return nil
}

func (m *memKeys) GetAPIKeyByHash(_ context.Context, hash []byte) (*APIKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[string(hash)]
	if !ok {
		return nil, ErrAPIKeyNotFound
	}
	c := *k
	return &c, nil
}

func (m *memKeys) ListAPIKeys(context.Context, string) ([]*APIKey, error) { return nil, nil }

func (m *memKeys) RevokeAPIKey(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.keys {
		if k.ID == id {
			k.RevokeTime = at
			return nil
		}
	}
	return ErrAPIKeyNotFound
}

func TestParsePermissions(t *testing.T) {
	var c Claims
	require.NoError(t, c.AddPermission("orders:worker"))
	require.NoError(t, c.AddPermission("orders:reader,writer"))
	require.NoError(t, c.AddPermission("temporal-system:admin"))
	require.Error(t, c.AddPermission("orders"))
	require.Error(t, c.AddPermission("orders:owner"))
	require.Equal(t, RoleWorker|RoleReader|RoleWriter|RoleAdmin, c.RoleIn("orders"))
	require.Equal(t, RoleAdmin, c.RoleIn("billing"), "a system role holds in every namespace")
}

func TestDefaultAuthorizer(t *testing.T) {
	a := NewDefaultAuthorizer()
	worker := &Claims{Subject: "w", Namespaces: map[string]Role{"orders": RoleWorker}}
	writer := &Claims{Subject: "c", Namespaces: map[string]Role{"orders": RoleWriter}}
	nsAdmin := &Claims{Subject: "a", Namespaces: map[string]Role{"orders": RoleAdmin}}
	clusterAdmin := &Claims{Subject: "root", System: RoleAdmin}
	cases := []struct {
		name   string
		claims *Claims
		method string
		ns     string
		allow  bool
	}{
		{"WorkerHeartbeats", worker, workflowService + "RecordWorkerHeartbeat", "orders", true},
		{"WorkerCannotStartActivities", worker, workflowService + "StartActivityExecution", "orders", false},
		{"WorkerOfOtherNamespace", worker, workflowService + "RecordWorkerHeartbeat", "billing", false},
		{"WriterStarts", writer, workflowService + "StartActivityExecution", "orders", true},
		{"WriterReads", writer, workflowService + "ListWorkers", "orders", true},
		{"WriterCannotPoll", writer, workflowService + "PollActivityTaskQueue", "orders", false},
		{"WriterCannotDrain", writer, livenessService + "DrainWorker", "orders", false},
		{"NamespaceAdminDrains", nsAdmin, livenessService + "DrainWorker", "orders", true},
		{"NamespaceAdminNotClusterAdmin", nsAdmin, adminService + "ListAPIKeys", "", false},
		{"UnknownMethodNeedsAdmin", writer, "/x.Y/Z", "orders", false},
		{"SystemInfoForAnyPrincipal", worker, workflowService + "GetSystemInfo", "", true},
		{"DescribeNamespaceNeedsARoleInIt", worker, workflowService + "DescribeNamespace", "billing", false},
		{"NoCredentials", nil, workflowService + "GetSystemInfo", "", false},
		{"HealthIsAnonymous", nil, healthService + "Check", "", true},
		{"WriterListsSearchAttributes", writer, operatorService + "ListSearchAttributes", "orders", true},
		{"WriterCannotAddSearchAttributes", writer, operatorService + "AddSearchAttributes", "orders", false},
		{"NamespaceAdminAddsSearchAttributes", nsAdmin, operatorService + "AddSearchAttributes", "orders", true},
		{"NamespaceAdminRemovesSearchAttributes", nsAdmin, operatorService + "RemoveSearchAttributes", "orders", true},
		{"NamespaceAdminOfOtherNamespace", nsAdmin, operatorService + "AddSearchAttributes", "billing", false},
		{"NamespaceAdminCannotCreateNamespaces", nsAdmin, workflowService + "RegisterNamespace", "orders", false},
		{"NamespaceAdminCannotUpdateItsNamespace", nsAdmin, workflowService + "UpdateNamespace", "orders", false},
		{"ClusterAdminCreatesNamespaces", clusterAdmin, workflowService + "RegisterNamespace", "fresh", true},
		{"ClusterAdminUpdatesNamespaces", clusterAdmin, workflowService + "UpdateNamespace", "orders", true},
		{"NamespaceAdminCannotDeleteItsNamespace", nsAdmin, operatorService + "DeleteNamespace", "orders", false},
		{"ClusterAdminDeletesNamespaces", clusterAdmin, operatorService + "DeleteNamespace", "orders", true},
		{"WriterDescribesTaskQueues", writer, workflowService + "DescribeTaskQueue", "orders", true},
		{"DescribeTaskQueueNeedsARoleInIt", writer, workflowService + "DescribeTaskQueue", "billing", false},
		{"WriterPausesActivities", writer, workflowService + "PauseActivity", "orders", true},
		{"WorkerCannotResetActivities", worker, workflowService + "ResetActivityExecution", "orders", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := a.Authorize(context.Background(), tc.claims, &CallTarget{APIName: tc.method, Namespace: tc.ns})
			require.NoError(t, err)
			require.Equal(t, tc.allow, res.Decision == DecisionAllow, res.Reason)
			if !tc.allow {
				require.NotEmpty(t, res.Reason)
			}
		})
	}
}

func TestAPIKeys(t *testing.T) {
	ctx := context.Background()
	store := &memKeys{}
	key, id, err := NewAPIKey()
	require.NoError(t, err)
	require.Equal(t, id, apiKeyID(key))
	require.NoError(t, store.CreateAPIKey(ctx, APIKey{ID: id, Hash: HashAPIKey(key), Namespace: "orders", Roles: RoleWorker}))
	a := NewAPIKeyAuthenticator(store, "static-admin-key-0123456789")

	t.Run("ValidKey", func(t *testing.T) {
		c, err := a.Authenticate(ctx, key)
		require.NoError(t, err)
		require.Equal(t, "apikey:"+id, c.Subject)
		require.Equal(t, RoleWorker, c.RoleIn("orders"))
	})
	t.Run("StaticAdmin", func(t *testing.T) {
		c, err := a.Authenticate(ctx, "static-admin-key-0123456789")
		require.NoError(t, err)
		require.Equal(t, RoleAdmin, c.RoleIn("anything"))
	})
	t.Run("AlteredKey", func(t *testing.T) {
		last := "A"
		if key[len(key)-1] == 'A' {
			last = "B" // a key ending in "A" would not be altered by it
		}
		_, err := a.Authenticate(ctx, key[:len(key)-1]+last)
		require.ErrorContains(t, err, "not valid")
		require.NotContains(t, err.Error(), key[len(APIKeyPrefix)+17:], "the secret is never echoed")
	})
	t.Run("RevokedAtOnce", func(t *testing.T) {
		require.NoError(t, store.RevokeAPIKey(ctx, id, time.Now()))
		_, err := a.Authenticate(ctx, key)
		require.ErrorContains(t, err, "revoked")
	})
}

func TestJWT(t *testing.T) {
	dir := t.TempDir()
	jwksPath := filepath.Join(dir, "jwks.json")
	k1, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	k2, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	writeJWKS(t, jwksPath, map[string]*ecdsa.PrivateKey{"k1": k1})

	now := time.Now()
	a, err := NewJWTAuthenticator(JWTConfig{JWKSFile: jwksPath, Audience: "vigil"}, func() time.Time { return now })
	require.NoError(t, err)
	sign := func(key *ecdsa.PrivateKey, kid string, claims jwt.MapClaims) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		require.NoError(t, err)
		return s
	}
	valid := jwt.MapClaims{"sub": "alice", "aud": "vigil", "exp": now.Add(time.Hour).Unix(), "permissions": []string{"orders:writer", "billing:reader"}}

	c, err := a.Authenticate(context.Background(), sign(k1, "k1", valid))
	require.NoError(t, err)
	require.Equal(t, "jwt:alice", c.Subject)
	require.Equal(t, RoleWriter, c.RoleIn("orders"))
	require.Equal(t, RoleReader, c.RoleIn("billing"))

	_, err = a.Authenticate(context.Background(), sign(k2, "k1", valid))
	require.ErrorContains(t, err, "signature")
	expired := jwt.MapClaims{"sub": "alice", "aud": "vigil", "exp": now.Add(-time.Hour).Unix()}
	_, err = a.Authenticate(context.Background(), sign(k1, "k1", expired))
	require.ErrorContains(t, err, "expired")
	wrongAud := jwt.MapClaims{"sub": "alice", "aud": "other", "exp": now.Add(time.Hour).Unix()}
	_, err = a.Authenticate(context.Background(), sign(k1, "k1", wrongAud))
	require.Error(t, err)

	t.Run("KeySetReloadedOnChange", func(t *testing.T) {
		_, err := a.Authenticate(context.Background(), sign(k2, "k2", valid))
		require.Error(t, err, "k2 is not in the key set yet")
		writeJWKS(t, jwksPath, map[string]*ecdsa.PrivateKey{"k2": k2})
		now = now.Add(2 * jwksReloadInterval)
		_, err = a.Authenticate(context.Background(), sign(k2, "k2", valid))
		require.NoError(t, err)
		_, err = a.Authenticate(context.Background(), sign(k1, "k1", valid))
		require.Error(t, err, "k1 was removed from the key set")
	})
}

func writeJWKS(t *testing.T, path string, keys map[string]*ecdsa.PrivateKey) {
	t.Helper()
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	for kid, k := range keys {
		enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
		x, y := make([]byte, 32), make([]byte, 32)
		k.X.FillBytes(x)
		k.Y.FillBytes(y)
		set.Keys = append(set.Keys, map[string]string{"kty": "EC", "crv": "P-256", "kid": kid, "x": enc(x), "y": enc(y), "use": "sig"})
	}
	b, err := json.Marshal(set)
	require.NoError(t, err)
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, b, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func TestTaskTokenSigner(t *testing.T) {
	old := SigningKey{Version: 1, Secret: []byte("0123456789abcdef0123456789abcdef")}
	s, err := NewTaskTokenSigner([]SigningKey{old})
	require.NoError(t, err)
	signed := s.Sign([]byte("inner"), "apikey:a")
	require.Equal(t, signed, s.Sign([]byte("inner"), "apikey:a"), "deterministic")

	token, principal, err := s.Verify(signed)
	require.NoError(t, err)
	require.Equal(t, "inner", string(token))
	require.Equal(t, "apikey:a", principal)

	for i := range signed {
		altered := append([]byte(nil), signed...)
		altered[i] ^= 0x40
		_, _, err := s.Verify(altered)
		require.ErrorIs(t, err, ErrTaskTokenInvalid, "byte %d altered", i)
	}
	_, _, err = s.Verify([]byte("inner"))
	require.ErrorIs(t, err, ErrTaskTokenInvalid, "an unsigned token")

	t.Run("RotationKeepsOldTokensValid", func(t *testing.T) {
		require.NoError(t, s.SetKeys([]SigningKey{{Version: 2, Secret: []byte("fedcba9876543210fedcba9876543210")}, old}))
		require.Equal(t, int32(2), s.SigningVersion())
		_, _, err := s.Verify(signed)
		require.NoError(t, err, "signed with version 1")
		fresh := s.Sign([]byte("inner"), "apikey:a")
		require.NotEqual(t, signed, fresh)
		onlyOld, err := NewTaskTokenSigner([]SigningKey{old})
		require.NoError(t, err)
		_, _, err = onlyOld.Verify(fresh)
		require.ErrorIs(t, err, ErrTaskTokenInvalid, "a host that does not know version 2 refuses it")
	})
}
