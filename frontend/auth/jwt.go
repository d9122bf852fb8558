package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWTConfig configures JWT authentication.
type JWTConfig struct {
	// JWKSFile holds the keys tokens are signed with (RFC 7517 JSON Web Key Set: RSA, EC and
	// Ed25519 keys). It is re-read when it changes.
	JWKSFile string `yaml:"jwksFile"`
	// Audience, when set, must be in the token's "aud".
	Audience string `yaml:"audience"`
	// Issuer, when set, must be the token's "iss".
	Issuer string `yaml:"issuer"`
	// PermissionsClaim names the claim holding "<namespace>:<role>" strings; default
	// "permissions", as Temporal's default claim mapper.
	PermissionsClaim string `yaml:"permissionsClaim"`
}

// jwksReloadInterval bounds how often the JWKS file is checked for changes.
const jwksReloadInterval = time.Second

// JWTAuthenticator verifies bearer JWTs and maps their permissions claim to Claims, in the
// format of Temporal's default JWT claim mapper.
type JWTAuthenticator struct {
	cfg  JWTConfig
	keys *watchedFile[map[string]any]
	now  func() time.Time
}

// NewJWTAuthenticator loads cfg.JWKSFile; it fails if the file does not hold a usable key set.
func NewJWTAuthenticator(cfg JWTConfig, now func() time.Time) (*JWTAuthenticator, error) {
	if cfg.PermissionsClaim == "" {
		cfg.PermissionsClaim = "permissions"
	}
	if now == nil {
		now = time.Now
	}
	keys, err := newWatchedFile(jwksReloadInterval, func(c [][]byte) (map[string]any, error) { return parseJWKS(c[0]) }, cfg.JWKSFile)
	if err != nil {
		return nil, fmt.Errorf("auth: jwks file %s: %w", cfg.JWKSFile, err)
	}
	return &JWTAuthenticator{cfg: cfg, keys: keys, now: now}, nil
}

// Authenticate verifies a token and returns its claims; the error text is safe to send back.
func (a *JWTAuthenticator) Authenticate(_ context.Context, token string) (*Claims, error) {
	keys, _ := a.keys.get(a.now()) // on a failed reload the previous keys stay in force
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(a.now),
		jwt.WithLeeway(5 * time.Second),
	}
	if a.cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(a.cfg.Audience))
	}
	if a.cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(a.cfg.Issuer))
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if key, ok := keys[kid]; ok {
			return key, nil
		}
		if kid == "" && len(keys) == 1 {
			for _, k := range keys {
				return k, nil
			}
		}
		return nil, fmt.Errorf("no key %q in the key set", kid)
	}, opts...)
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, errors.New("JWT has expired")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return nil, errors.New("JWT signature is not valid")
	case err != nil:
		return nil, fmt.Errorf("JWT is not valid: %v", err)
	}
	sub, _ := claims["sub"].(string)
	c := &Claims{Subject: "jwt:" + sub}
	perms, _ := claims[a.cfg.PermissionsClaim].([]any)
	for _, p := range perms {
		s, ok := p.(string)
		if !ok {
			continue
		}
		// Temporal's mapper ignores permissions it cannot read; so do we, rather than refusing
		// a token that also carries permissions meant for another system.
		_ = c.AddPermission(s)
	}
	return c, nil
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS reads the public keys of a JSON Web Key Set, keyed by kid.
func parseJWKS(data []byte) (map[string]any, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("parse jwks: %w", err)
	}
	out := make(map[string]any)
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		key, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("jwks key %d (%q): %w", i, k.Kid, err)
		}
		out[k.Kid] = key
	}
	if len(out) == 0 {
		return nil, errors.New("jwks holds no signing key")
	}
	return out, nil
}

func (k jwk) publicKey() (any, error) {
	b64 := func(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "=")) }
	switch k.Kty {
	case "RSA":
		n, err := b64(k.N)
		if err != nil {
			return nil, err
		}
		e, err := b64(k.E)
		if err != nil {
			return nil, err
		}
		if len(n) < 256 {
			return nil, errors.New("RSA keys under 2048 bits are refused")
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, fmt.Errorf("unsupported curve %q", k.Crv)
		}
		x, err := b64(k.X)
		if err != nil {
			return nil, err
		}
		y, err := b64(k.Y)
		if err != nil {
			return nil, err
		}
		size := (curve.Params().BitSize + 7) / 8
		if len(x) > size || len(y) > size {
			return nil, errors.New("bad EC key: coordinates too long")
		}
		point := make([]byte, 1+2*size)
		point[0] = 4 // uncompressed
		copy(point[1+size-len(x):1+size], x)
		copy(point[1+2*size-len(y):], y)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point) // checks the point is on the curve
		if err != nil {
			return nil, fmt.Errorf("bad EC key: %w", err)
		}
		return pub, nil
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, fmt.Errorf("unsupported curve %q", k.Crv)
		}
		x, err := b64(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("bad Ed25519 key")
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, fmt.Errorf("unsupported key type %q", k.Kty)
}
