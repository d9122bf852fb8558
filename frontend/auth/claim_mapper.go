package auth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

// AuthInfo is what a caller presented.
type AuthInfo struct {
	// AuthToken is the "authorization" header, e.g. "Bearer <key or JWT>"; "" if absent.
	AuthToken string
	// TLSPeer is the verified client certificate (mTLS), nil without one.
	TLSPeer *x509.Certificate
}

// ClaimMapper turns what a caller presented into Claims. It returns (nil, nil) for a caller
// that presented nothing, and an error for credentials that do not hold (bad signature,
// expired, revoked): the error's text is sent to the caller, so it must hold no secret.
// Temporal's server has the same interface.
type ClaimMapper interface {
	GetClaims(ctx context.Context, info *AuthInfo) (*Claims, error)
}

// DefaultClaimMapper authenticates bearer API keys (prefix "vgl_", or a static admin key),
// bearer JWTs, and client certificates.
type DefaultClaimMapper struct {
	// APIKeys checks API keys; nil refuses them.
	APIKeys *APIKeyAuthenticator
	// JWT checks JWTs; nil refuses them.
	JWT *JWTAuthenticator
	// TLSPermissions maps a client certificate's subject common name (or one of its DNS, URI
	// or email SANs) to permissions "<namespace>:<role>". A verified certificate with no entry
	// is authenticated (and named in logs) but may do nothing.
	TLSPermissions map[string][]string
}

// GetClaims implements ClaimMapper. A bearer token wins over a client certificate: the
// certificate may belong to a proxy that forwards many callers.
func (m *DefaultClaimMapper) GetClaims(ctx context.Context, info *AuthInfo) (*Claims, error) {
	if info.AuthToken != "" {
		scheme, token, ok := strings.Cut(info.AuthToken, " ")
		if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
			return nil, errors.New(`authorization header must be "Bearer <API key or JWT>"`)
		}
		token = strings.TrimSpace(token)
		if m.JWT != nil && strings.Count(token, ".") == 2 && !strings.HasPrefix(token, APIKeyPrefix) {
			return m.JWT.Authenticate(ctx, token)
		}
		if m.APIKeys != nil {
			return m.APIKeys.Authenticate(ctx, token)
		}
		return nil, errors.New("bearer credentials are not accepted by this server")
	}
	if info.TLSPeer != nil {
		return m.tlsClaims(info.TLSPeer)
	}
	return nil, nil
}

func (m *DefaultClaimMapper) tlsClaims(cert *x509.Certificate) (*Claims, error) {
	names := []string{cert.Subject.CommonName}
	names = append(names, cert.DNSNames...)
	names = append(names, cert.EmailAddresses...)
	for _, u := range cert.URIs {
		names = append(names, u.String())
	}
	subject := cert.Subject.CommonName
	if subject == "" && len(names) > 1 {
		subject = names[1]
	}
	c := &Claims{Subject: "mtls:" + subject}
	for _, name := range names {
		if name == "" {
			continue
		}
		for _, p := range m.TLSPermissions[name] {
			if err := c.AddPermission(p); err != nil {
				return nil, fmt.Errorf("configured permission of %q: %w", name, err)
			}
		}
	}
	return c, nil
}
