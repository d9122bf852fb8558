package frontend

import (
	"context"
	"fmt"
	"sync"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/quotas"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/frontend/namespace"
)

// principalLimiterCap bounds the per-principal buckets kept: principals are authenticated, so
// their number is what the operator minted, but a bound keeps a JWT issuer with many subjects
// from growing the map without end. Past it, the map starts over (every bucket full again).
const principalLimiterCap = 100_000

// abuseLimiter applies the limits that protect one caller from another, after auth:
// frontend.principalRPS (one token bucket per principal and namespace; long polls exempt) and
// frontend.maxConcurrentLongPolls (open long polls per namespace).
type abuseLimiter struct {
	namespaces   *namespace.Registry
	principalRPS func(string) float64
	maxPolls     func(string) int
	timeSource   clock.TimeSource
	scope        tally.Scope

	mu         sync.Mutex
	principals *quotas.KeyedLimiter // by namespace + "\x00" + subject
	openPolls  map[string]int       // by namespace
}

func newAbuseLimiter(deps Deps) *abuseLimiter {
	return &abuseLimiter{
		namespaces:   deps.Namespaces,
		principalRPS: dynamicconfig.PrincipalRPS.Get(deps.DynamicConfig),
		maxPolls:     dynamicconfig.MaxConcurrentLongPolls.Get(deps.DynamicConfig),
		timeSource:   deps.TimeSource,
		scope:        deps.MetricsScope,
		principals:   quotas.NewKeyedLimiter(principalLimiterCap),
		openPolls:    make(map[string]int),
	}
}

func (l *abuseLimiter) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	withNamespace, ok := req.(interface{ GetNamespace() string })
	if !ok {
		return handler(ctx, req)
	}
	name := withNamespace.GetNamespace()
	if _, err := l.namespaces.GetByName(name); err != nil {
		return handler(ctx, req) // unknown namespaces get no counters: the handler refuses them
	}
	if isLongPoll(info.FullMethod) {
		release, err := l.openPoll(name)
		if err != nil {
			return nil, err
		}
		defer release()
		return handler(ctx, req)
	}
	if claims := auth.ClaimsFromContext(ctx); claims != nil && !heartbeatMethods[operation(info.FullMethod)] {
		if err := l.allowPrincipal(name, claims.Subject); err != nil {
			return nil, err
		}
	}
	return handler(ctx, req)
}

// heartbeatMethods are exempt from the per-principal and per-namespace rate limits: a worker
// fleet shares its principal and its namespace, and a heartbeat refused by a rate limit can
// cost a live worker its lease while the host has room. Heartbeats meet history's admission
// control instead, whose refusals the expiry brake counts (so no lease runs out because of
// them), and the transport's early refusal; new worker keys meet worker.registrationRPS.
// Counted against frontend.namespaceRPS, a fleet offering a little more than the limit had
// heartbeats refused that no brake knew of, and live workers were declared INACTIVE.
var heartbeatMethods = map[string]bool{"RecordWorkerHeartbeat": true, "ShutdownWorker": true, "RecordHeartbeat": true}

func (l *abuseLimiter) allowPrincipal(ns, subject string) error {
	rps := l.principalRPS(ns)
	if l.principals.Allow(ns+"\x00"+subject, rps, l.timeSource.Now()) {
		return nil
	}
	metrics.AbuseLimited.With(l.scope, metrics.KindTag("principal_rps")).Inc(1)
	return &serviceerror.ResourceExhausted{
		Cause: enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT,
		Scope: enumspb.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE,
		Message: fmt.Sprintf("%s is over its rate limit of %g requests per second in namespace %q (frontend.principalRPS)",
			subject, rps, ns),
	}
}

func (l *abuseLimiter) openPoll(ns string) (release func(), err error) {
	limit := l.maxPolls(ns)
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit > 0 && l.openPolls[ns] >= limit {
		metrics.AbuseLimited.With(l.scope, metrics.KindTag("long_polls")).Inc(1)
		return nil, &serviceerror.ResourceExhausted{
			Cause: enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT,
			Scope: enumspb.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE,
			Message: fmt.Sprintf("namespace %q already has %d long polls open on this frontend (frontend.maxConcurrentLongPolls)",
				ns, limit),
		}
	}
	l.openPolls[ns]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.openPolls[ns]--; l.openPolls[ns] <= 0 {
			delete(l.openPolls, ns)
		}
	}, nil
}
