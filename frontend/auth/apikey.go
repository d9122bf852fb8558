package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// APIKeyPrefix starts every key vigil mints, so a leaked key is recognisable (secret scanners)
// and told apart from a JWT.
const APIKeyPrefix = "vgl_"

// apiKeySecretBytes is the key's entropy: 256 bits, so storing a plain SHA-256 of the key is
// enough (no password hashing needed: nothing to brute-force).
const apiKeySecretBytes = 32

// APIKey is a stored key, without its secret.
type APIKey struct {
	// ID is public: it is part of the key and names it in lists, logs and revocations.
	ID          string
	Hash        []byte
	Namespace   string
	Roles       Role
	Description string
	CreateTime  time.Time
	// RevokeTime is zero while the key is valid.
	RevokeTime time.Time
}

// ErrAPIKeyNotFound is returned by an APIKeyStore for a hash or ID it does not hold.
var ErrAPIKeyNotFound = errors.New("api key not found")

// APIKeyStore keeps API keys (the server adapts persistence.SecurityStore to it). It is
// shared by every host, so a revocation written by one is read by all.
type APIKeyStore interface {
	CreateAPIKey(ctx context.Context, key APIKey) error
	// GetAPIKeyByHash returns ErrAPIKeyNotFound for an unknown hash.
	GetAPIKeyByHash(ctx context.Context, hash []byte) (*APIKey, error)
	ListAPIKeys(ctx context.Context, namespace string) ([]*APIKey, error)
	// RevokeAPIKey returns ErrAPIKeyNotFound for an unknown ID.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error
}

// HashAPIKey is what the store keeps of a key.
func HashAPIKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// NewAPIKey mints a key "vgl_<id>_<secret>" and returns it with its public ID.
func NewAPIKey() (key, id string, err error) {
	idBytes := make([]byte, 8)
	secret := make([]byte, apiKeySecretBytes)
	if _, err := rand.Read(idBytes); err != nil {
		return "", "", err
	}
	if _, err := rand.Read(secret); err != nil {
		return "", "", err
	}
	id = hex.EncodeToString(idBytes)
	return APIKeyPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(secret), id, nil
}

// apiKeyID returns the public ID inside a key, for messages; "" if the key is malformed.
func apiKeyID(key string) string {
	rest, ok := strings.CutPrefix(key, APIKeyPrefix)
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 16 {
		return ""
	}
	if _, err := hex.DecodeString(id); err != nil {
		return ""
	}
	return id
}

// APIKeyAuthenticator checks bearer API keys.
//
// Revocation must hold at once on every host sharing the store, so a key is looked up in the
// store on every call: there is no positive cache to outlive a revocation. The lookup is one
// primary-key read of a small table (the hash is unique and indexed), cheaper than the write
// the call itself usually makes. Static admin keys (from a file or the static config) are
// compared in memory, in constant time.
type APIKeyAuthenticator struct {
	store       APIKeyStore
	staticAdmin [][]byte
}

// NewAPIKeyAuthenticator checks keys against store (nil: only the static admin keys).
// staticAdminKeys are cluster admin keys that need no store.
func NewAPIKeyAuthenticator(store APIKeyStore, staticAdminKeys ...string) *APIKeyAuthenticator {
	a := &APIKeyAuthenticator{store: store}
	for _, k := range staticAdminKeys {
		if k = strings.TrimSpace(k); k != "" {
			a.staticAdmin = append(a.staticAdmin, HashAPIKey(k))
		}
	}
	return a
}

// Authenticate returns the key's claims, or an error whose text is safe to send to the caller.
func (a *APIKeyAuthenticator) Authenticate(ctx context.Context, key string) (*Claims, error) {
	hash := HashAPIKey(key)
	for i, admin := range a.staticAdmin {
		if subtle.ConstantTimeCompare(hash, admin) == 1 {
			c := &Claims{Subject: fmt.Sprintf("apikey:static-admin-%d", i+1)}
			c.Grant(SystemNamespace, RoleAdmin)
			return c, nil
		}
	}
	id := apiKeyID(key)
	if id == "" || a.store == nil {
		return nil, errors.New("API key is not valid")
	}
	rec, err := a.store.GetAPIKeyByHash(ctx, hash)
	if errors.Is(err, ErrAPIKeyNotFound) {
		return nil, fmt.Errorf("API key %s is not valid", id)
	}
	if err != nil {
		return nil, &storeError{err: err}
	}
	if !rec.RevokeTime.IsZero() {
		return nil, fmt.Errorf("API key %s was revoked", rec.ID)
	}
	c := &Claims{Subject: "apikey:" + rec.ID}
	c.Grant(rec.Namespace, rec.Roles)
	return c, nil
}

// storeError marks a failure to reach the key store: the caller should retry (Unavailable),
// not conclude its key is bad.
type storeError struct{ err error }

func (e *storeError) Error() string { return "API key store unavailable: " + e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }
