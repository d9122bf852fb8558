package auth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/common/metrics"
)

// Audit log lines are rate-limited so that a client hammering the server with bad credentials
// cannot flood the log; the number of lines left out is reported on the next one.
const (
	auditLinesPerSecond = 20
	auditBurst          = 50
)

// Denial kinds, the metric's kind tag.
const (
	DenialUnauthenticated  = "unauthenticated"
	DenialPermissionDenied = "permission_denied"
	DenialWorkerOwner      = "worker_owner"
)

type claimsKey struct{}

// WithClaims returns ctx carrying the caller's claims.
func WithClaims(ctx context.Context, c *Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// ClaimsFromContext returns the claims of the authenticated caller, nil when auth is off or the
// method is anonymous.
func ClaimsFromContext(ctx context.Context) *Claims {
	c, _ := ctx.Value(claimsKey{}).(*Claims)
	return c
}

// Interceptor authenticates and authorizes every call before its handler runs.
type Interceptor struct {
	mapper     ClaimMapper
	authorizer Authorizer
	audit      *Auditor
	methods    map[string]Access
}

// NewInterceptor applies mapper and authorizer to every call, logging denials and admin
// actions through audit.
func NewInterceptor(mapper ClaimMapper, authorizer Authorizer, audit *Auditor) *Interceptor {
	return &Interceptor{mapper: mapper, authorizer: authorizer, audit: audit, methods: MethodAccess}
}

// Unary is the grpc.UnaryServerInterceptor.
func (i *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := i.authorize(ctx, info.FullMethod, req)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Stream is the grpc.StreamServerInterceptor: the call is authorized on its first message,
// whose namespace it takes (a stream without one needs a system role).
func (i *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &authorizedStream{ServerStream: ss, i: i, method: info.FullMethod})
}

type authorizedStream struct {
	grpc.ServerStream
	i          *Interceptor
	method     string
	ctx        context.Context
	authorized bool
}

func (s *authorizedStream) Context() context.Context {
	if s.ctx != nil {
		return s.ctx
	}
	return s.ServerStream.Context()
}

func (s *authorizedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if !s.authorized {
		ctx, err := s.i.authorize(s.ServerStream.Context(), s.method, m)
		if err != nil {
			return err
		}
		s.ctx, s.authorized = ctx, true
	}
	return nil
}

func (i *Interceptor) authorize(ctx context.Context, method string, req any) (context.Context, error) {
	namespace := ""
	if r, ok := req.(interface{ GetNamespace() string }); ok {
		namespace = r.GetNamespace()
	}
	claims, err := i.mapper.GetClaims(ctx, authInfoFrom(ctx))
	if err != nil {
		var se *storeError
		if errors.As(err, &se) {
			i.audit.logger.Warn("auth: credential store unavailable", zap.String("rpc-method", method), zap.Error(se.err))
			return ctx, serviceerror.ToStatus(serviceerror.NewUnavailable("credential store unavailable, retry")).Err()
		}
		i.audit.Denied(method, namespace, nil, DenialUnauthenticated, err.Error())
		return ctx, status.Error(codes.Unauthenticated, "invalid credentials: "+err.Error())
	}
	target := &CallTarget{APIName: method, Namespace: namespace, Request: req}
	result, err := i.authorizer.Authorize(ctx, claims, target)
	if err != nil {
		i.audit.logger.Error("auth: authorizer failed", zap.String("rpc-method", method), zap.Error(err))
		return ctx, serviceerror.ToStatus(serviceerror.NewUnavailable("authorization failed, retry")).Err()
	}
	if result.Decision != DecisionAllow {
		if claims == nil {
			i.audit.Denied(method, namespace, nil, DenialUnauthenticated, result.Reason)
			return ctx, status.Error(codes.Unauthenticated,
				"no credentials: send \"authorization: Bearer <API key or JWT>\" or a client certificate")
		}
		i.audit.Denied(method, namespace, claims, DenialPermissionDenied, result.Reason)
		return ctx, serviceerror.ToStatus(serviceerror.NewPermissionDenied(
			"permission denied: "+operation(method)+": "+result.Reason, "")).Err()
	}
	if access, ok := i.methods[method]; !ok || access.Role == RoleAdmin {
		i.audit.AdminAction(method, namespace, claims)
	}
	return WithClaims(ctx, claims), nil
}

func authInfoFrom(ctx context.Context) *AuthInfo {
	info := &AuthInfo{}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			info.AuthToken = v[0]
		}
	}
	if p, ok := peer.FromContext(ctx); ok {
		if tlsInfo, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(tlsInfo.State.VerifiedChains) > 0 {
			// Only a certificate that chained to the client CA names a principal; one merely
			// presented (when client certificates are optional) does not.
			info.TLSPeer = tlsInfo.State.VerifiedChains[0][0]
		}
	}
	return info
}

// PeerCertificate returns the verified client certificate of a call, nil without one.
func PeerCertificate(ctx context.Context) *x509.Certificate { return authInfoFrom(ctx).TLSPeer }

func operation(fullMethod string) string {
	if i := strings.LastIndexByte(fullMethod, '/'); i >= 0 {
		return fullMethod[i+1:]
	}
	return fullMethod
}

// Auditor logs denials and admin actions (rate-limited) and counts them.
type Auditor struct {
	logger     *zap.Logger
	scope      tally.Scope
	limiter    *rate.Limiter
	suppressed atomic.Int64
}

// NewAuditor logs to logger and counts in scope.
func NewAuditor(logger *zap.Logger, scope tally.Scope) *Auditor {
	if logger == nil {
		logger = zap.NewNop()
	}
	if scope == nil {
		scope = tally.NoopScope
	}
	return &Auditor{
		logger:  logger.Named("audit"),
		scope:   scope,
		limiter: rate.NewLimiter(auditLinesPerSecond, auditBurst),
	}
}

// Denied records a refused call. principal may be nil (no or bad credentials).
func (a *Auditor) Denied(method, namespace string, principal *Claims, kind, reason string) {
	metrics.AuthDenials.With(a.scope, metrics.OperationTag(operation(method)), metrics.KindTag(kind)).Inc(1)
	a.log(zap.WarnLevel, "auth: call denied", method, namespace, principal, zap.String("denial", kind), zap.String("reason", reason))
}

// AdminAction records an allowed admin call.
func (a *Auditor) AdminAction(method, namespace string, principal *Claims) {
	metrics.AuthAdminActions.With(a.scope, metrics.OperationTag(operation(method))).Inc(1)
	a.log(zap.InfoLevel, "auth: admin action", method, namespace, principal)
}

func (a *Auditor) log(level zapcore.Level, msg, method, namespace string, principal *Claims, fields ...zap.Field) {
	if !a.limiter.AllowN(time.Now(), 1) {
		a.suppressed.Add(1)
		return
	}
	subject := "<anonymous>"
	if principal != nil {
		subject = principal.Subject
	}
	fields = append(fields, zap.String("principal", subject), zap.String("rpc-method", operation(method)), zap.String("namespace", namespace))
	if n := a.suppressed.Swap(0); n > 0 {
		fields = append(fields, zap.Int64("audit-lines-suppressed", n))
	}
	a.logger.Log(level, msg, fields...)
}

// HTTPAdminGuard admits an HTTP request whose caller is a cluster admin: a bearer API key or
// JWT in the Authorization header, or a verified client certificate. It guards /debug/pprof
// when auth is on.
func (i *Interceptor) HTTPAdminGuard(r *http.Request) (int, error) {
	info := &AuthInfo{AuthToken: r.Header.Get("Authorization")}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		info.TLSPeer = r.TLS.VerifiedChains[0][0]
	}
	claims, err := i.mapper.GetClaims(r.Context(), info)
	switch {
	case err != nil:
		i.audit.Denied(r.URL.Path, "", nil, DenialUnauthenticated, err.Error())
		return http.StatusUnauthorized, fmt.Errorf("invalid credentials: %v", err)
	case claims == nil:
		i.audit.Denied(r.URL.Path, "", nil, DenialUnauthenticated, "no credentials")
		return http.StatusUnauthorized, errors.New("profiles need a cluster admin: send \"Authorization: Bearer <API key or JWT>\"")
	case claims.System&RoleAdmin == 0:
		i.audit.Denied(r.URL.Path, "", claims, DenialPermissionDenied, "needs role admin in every namespace")
		return http.StatusForbidden, fmt.Errorf("%s needs role admin in every namespace", claims.Subject)
	}
	i.audit.AdminAction(r.URL.Path, "", claims)
	return 0, nil
}
