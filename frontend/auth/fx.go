package auth

import (
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
)

// Module provides the *Interceptor from a Config, an APIKeyStore, a logger and a scope, through
// a ClaimMapper and an Authorizer that another module may replace with fx.Decorate, as one
// replaces Temporal's with temporal.WithClaimMapper / WithAuthorizer.
var Module = fx.Module("auth",
	fx.Provide(
		newDefaultClaimMapper,
		NewDefaultAuthorizer,
		func(logger *zap.Logger, scope tally.Scope) *Auditor { return NewAuditor(logger, scope) },
		NewInterceptor,
	),
)

func newDefaultClaimMapper(cfg Config, store APIKeyStore, ts clock.TimeSource) (ClaimMapper, error) {
	return NewDefaultClaimMapper(cfg, store, func() time.Time { return ts.Now() })
}

// NewDefaultClaimMapper builds the DefaultClaimMapper a Config describes.
func NewDefaultClaimMapper(cfg Config, store APIKeyStore, now func() time.Time) (*DefaultClaimMapper, error) {
	admin, err := cfg.StaticAdminKeys()
	if err != nil {
		return nil, err
	}
	m := &DefaultClaimMapper{APIKeys: NewAPIKeyAuthenticator(store, admin...), TLSPermissions: cfg.TLSPermissions}
	for _, perms := range cfg.TLSPermissions { // refuse a typo at start, not at the first call
		var c Claims
		for _, p := range perms {
			if err := c.AddPermission(p); err != nil {
				return nil, err
			}
		}
	}
	if cfg.JWT.JWKSFile != "" {
		if m.JWT, err = NewJWTAuthenticator(cfg.JWT, now); err != nil {
			return nil, err
		}
	}
	return m, nil
}
