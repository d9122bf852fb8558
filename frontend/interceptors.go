package frontend

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/quotas"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend/namespace"
)

// logKeyMethod is the log field naming the RPC a line is about.
const logKeyMethod = "rpc-method"

// Interceptors returns the frontend's unary interceptors, outermost first, for
// grpc.ChainUnaryInterceptor:
//
//  1. metrics: rpc_requests, rpc_errors (by code), rpc_latency, tagged by operation; sees the
//     final status of every call; long polls' waits and ordinary ends go to long_poll_latency
//     and long_poll_ends instead of rpc_latency and rpc_errors;
//  2. errors: every error leaves as serviceerror.ToStatus(err).Err(); context errors become
//     DeadlineExceeded/Canceled; a Canceled while the client's own call is still live (a
//     context the server canceled inside) becomes Unavailable; anything else unexpected
//     becomes Internal and is logged;
//  3. malformed requests: a request the codec could not decode for the client's fault (a string
//     that is not UTF-8) is InvalidArgument (see codec.go);
//  4. panic guard: a panic becomes Internal and is logged with its stack;
//  5. auth (when Deps.Auth is set): the caller's claims and the method's role in the
//     request's namespace; Unauthenticated / PermissionDenied before anything else runs;
//  6. abuse limits: per principal and namespace, frontend.principalRPS (long polls and
//     heartbeats exempt);
//     open long polls per namespace, frontend.maxConcurrentLongPolls;
//  7. rate limit: per namespace, frontend.namespaceRPS; long polls and heartbeats are exempt;
//  8. validation: well-formed values (durations, timestamps, enums, sizes) everywhere in the
//     request, then limits and required fields, before any handler runs.
func Interceptors(deps Deps) []grpc.UnaryServerInterceptor {
	deps = deps.withDefaults()
	limiter := newNamespaceRateLimiter(deps.Namespaces, dynamicconfig.NamespaceRPS.Get(deps.DynamicConfig), deps.TimeSource)
	v := newValidator(deps)
	chain := []grpc.UnaryServerInterceptor{
		metricsInterceptor(deps.MetricsScope, deps.TimeSource),
		errorInterceptor(deps.Logger),
		malformedInterceptor,
		panicInterceptor(deps.Logger),
	}
	if deps.Auth != nil {
		chain = append(chain, deps.Auth.Unary)
	}
	return append(chain,
		newAbuseLimiter(deps).intercept,
		limiter.intercept,
		func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if isLongPoll(info.FullMethod) {
				return handler(ctx, req)
			}
			if err := v.validate(req); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		},
	)
}

// operation is the method name without its service: low cardinality, fixed by the protos.
func operation(fullMethod string) string {
	if i := strings.LastIndexByte(fullMethod, '/'); i >= 0 {
		return fullMethod[i+1:]
	}
	return fullMethod
}

// longPolls are held open until there is something to answer; they are neither rate limited
// (a worker keeps a few open at all times, and limiting them would only make it spin) nor
// validated (see validator).
var longPolls = func() map[string]bool {
	m := map[string]bool{}
	for _, op := range metrics.LongPollOperations {
		m[op] = true
	}
	return m
}()

func isLongPoll(fullMethod string) bool { return longPolls[operation(fullMethod)] }

// metricsInterceptor counts and times every RPC. A long poll is held open until there is
// something to answer, so its time goes to long_poll_latency, not rpc_latency, and its ordinary
// ends (an empty answer; cancelled by the client or its deadline) to long_poll_ends, not
// rpc_errors: neither is a fault of the server.
func metricsInterceptor(scope tally.Scope, timeSource clock.TimeSource) grpc.UnaryServerInterceptor {
	var byMethod sync.Map // full method → *methodMetrics
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		m := methodMetricsFor(&byMethod, scope, info.FullMethod)
		start := timeSource.Now()
		m.requests.Inc(1)
		resp, err := handler(ctx, req)
		elapsed := timeSource.Now().Sub(start)
		if !m.longPoll {
			m.latency.Record(elapsed)
			if err != nil {
				metrics.RPCErrors.With(scope, m.op, metrics.CodeTag(status.Code(err).String())).Inc(1)
			}
			return resp, err
		}
		m.latency.Record(elapsed)
		switch code := status.Code(err); {
		case err == nil && emptyPollResponse(resp):
			metrics.LongPollEnds.With(scope, m.op, metrics.KindTag(metrics.LongPollEmpty)).Inc(1)
		case err == nil:
			metrics.LongPollEnds.With(scope, m.op, metrics.KindTag(metrics.LongPollAnswered)).Inc(1)
		case code == codes.Canceled || code == codes.DeadlineExceeded:
			metrics.LongPollEnds.With(scope, m.op, metrics.KindTag(metrics.LongPollCanceled)).Inc(1)
		default:
			metrics.RPCErrors.With(scope, m.op, metrics.CodeTag(code.String())).Inc(1)
		}
		return resp, err
	}
}

// methodMetrics are the series every call of one method touches. Tagging a scope builds a map
// and a key and looks them up under a lock, so they are made once per method rather than on
// every heartbeat.
type methodMetrics struct {
	op       metrics.Tag
	longPoll bool
	requests tally.Counter
	// latency is rpc_latency, or long_poll_latency for a long poll.
	latency tally.Timer
}

func methodMetricsFor(byMethod *sync.Map, scope tally.Scope, fullMethod string) *methodMetrics {
	if m, ok := byMethod.Load(fullMethod); ok {
		return m.(*methodMetrics)
	}
	op := metrics.OperationTag(operation(fullMethod))
	m := &methodMetrics{op: op, longPoll: isLongPoll(fullMethod), requests: metrics.RPCRequests.With(scope, op)}
	if m.longPoll {
		m.latency = metrics.LongPollLatency.With(scope, op)
	} else {
		m.latency = metrics.RPCLatency.With(scope, op)
	}
	actual, _ := byMethod.LoadOrStore(fullMethod, m)
	return actual.(*methodMetrics)
}

// emptyPollResponse reports whether a long poll answered without a task: no task token, or (a
// response without one) nothing at all.
func emptyPollResponse(resp any) bool {
	if t, ok := resp.(interface{ GetTaskToken() []byte }); ok {
		return len(t.GetTaskToken()) == 0
	}
	m, ok := resp.(proto.Message)
	return !ok || proto.Size(m) == 0
}

func errorInterceptor(logger *zap.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err == nil {
			return resp, nil
		}
		err = toStatusError(err, logger, info.FullMethod)
		if status.Code(err) == codes.Canceled && ctx.Err() == nil {
			// The client did not cancel: a context the server made for the call was canceled
			// inside it (history's router takes a call back from a shard owner that stopped
			// answering, and cancels it there). No SDK retries Canceled, which means "you gave
			// up"; the call's outcome is unknown and a retry is what it needs.
			return nil, serviceerror.ToStatus(serviceerror.NewUnavailable(
				"the call was canceled inside the server, not by the client: its outcome is unknown; retry: " + status.Convert(err).Message())).Err()
		}
		return nil, err
	}
}

// toStatusError converts any error a handler returns into a gRPC status error. A serviceerror
// value returned as is would reach the client as Unknown, which the SDK retries.
func toStatusError(err error, logger *zap.Logger, fullMethod string) error {
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	var svcErr serviceerror.ServiceError
	if errors.As(err, &svcErr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return serviceerror.ToStatus(err).Err()
	}
	// Not an error any code path means to return: a bug. Internal is not retried by clients
	// that were told internal_error_differentiation.
	logger.Error("frontend: unexpected error type", zap.String(logKeyMethod, fullMethod), tag.Error(err))
	return serviceerror.ToStatus(serviceerror.NewInternal(err.Error())).Err()
}

func panicInterceptor(logger *zap.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				logger.Error("frontend: panic in RPC handler",
					zap.String(logKeyMethod, info.FullMethod),
					zap.Any("panic", r),
					zap.ByteString("stack", debug.Stack()))
				resp, err = nil, serviceerror.NewInternalf("internal error in %s", operation(info.FullMethod))
			}
		}()
		return handler(ctx, req)
	}
}

// namespaceRateLimiter keeps one token bucket per configured namespace. Only configured
// namespaces get a bucket, so requests naming random namespaces cannot grow the map; they are
// answered NamespaceNotFound by the handler.
type namespaceRateLimiter struct {
	namespaces *namespace.Registry
	rps        func(namespace string) float64
	timeSource clock.TimeSource
	buckets    *quotas.KeyedLimiter
}

func newNamespaceRateLimiter(namespaces *namespace.Registry, rps func(string) float64, timeSource clock.TimeSource) *namespaceRateLimiter {
	return &namespaceRateLimiter{
		namespaces: namespaces,
		rps:        rps,
		timeSource: timeSource,
		buckets:    quotas.NewKeyedLimiter(0), // configured namespaces only: a closed set
	}
}

// allow takes a token from the namespace's bucket (see quotas.KeyedLimiter).
func (l *namespaceRateLimiter) allow(name string) (bool, float64) {
	rps := l.rps(name)
	return l.buckets.Allow(name, rps, l.timeSource.Now()), rps
}

func (l *namespaceRateLimiter) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if isLongPoll(info.FullMethod) || heartbeatMethods[operation(info.FullMethod)] {
		return handler(ctx, req)
	}
	withNamespace, ok := req.(interface{ GetNamespace() string })
	if !ok {
		return handler(ctx, req)
	}
	name := withNamespace.GetNamespace()
	if _, err := l.namespaces.GetByName(name); err != nil {
		return handler(ctx, req)
	}
	if allowed, rps := l.allow(name); !allowed {
		return nil, &serviceerror.ResourceExhausted{
			Cause:   enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT,
			Scope:   enumspb.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE,
			Message: fmt.Sprintf("namespace %q is over its rate limit of %g requests per second (frontend.namespaceRPS)", name, rps),
		}
	}
	return handler(ctx, req)
}
