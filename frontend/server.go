package frontend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // the SDK compresses every request with gzip
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	adminpb "github.com/vigilhq/vigil/api/gen/adminpb/v1"
	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/common/log/tag"
)

// MaxMessageSizeDefault is the largest message the server sends or receives: the SDK's own
// limit, so that any payload the SDK sends is accepted.
const MaxMessageSizeDefault = 128 << 20

// keepaliveMinTime is the shortest client ping interval tolerated. The SDK pings after 30 s of
// idleness (10 s if configured so) and also while no call is open; grpc-go's default policy
// (5 min, no pings without streams) answers that with GOAWAY "too_many_pings", which fails
// every open poll.
const keepaliveMinTime = 5 * time.Second

// ServerConfig is the frontend's static configuration.
type ServerConfig struct {
	// Address to listen on, host:port; ":0" picks a free port.
	Address string `yaml:"address"`
	// MaxMessageSize bounds messages both ways; default MaxMessageSizeDefault.
	MaxMessageSize int `yaml:"maxMessageSize"`
	// TLS, when set, is served on the port (see auth.NewServerTLSConfig); nil: plaintext.
	TLS *tls.Config `yaml:"-"`
	// KeepaliveTime is how long a connection may stay silent before the server pings the
	// client, and KeepaliveTimeout how long it then waits for the answer before it closes the
	// connection: a worker whose machine went away (no socket closed) is noticed after about
	// their sum, and its workers become suspect (connections.go). Defaults
	// KeepaliveTimeDefault and KeepaliveTimeoutDefault.
	KeepaliveTime    time.Duration `yaml:"keepaliveTime"`
	KeepaliveTimeout time.Duration `yaml:"keepaliveTimeout"`
	// MaxConnectionAge, when set, makes the server close connections older than it (GOAWAY,
	// then MaxConnectionAgeGrace for open calls), e.g. to rebalance clients behind a load
	// balancer. Zero: never.
	MaxConnectionAge      time.Duration `yaml:"maxConnectionAge"`
	MaxConnectionAgeGrace time.Duration `yaml:"maxConnectionAgeGrace"`
	// DisableConnectionSuspicion stops tracking which connection carries which worker: a dead
	// worker is then found by its lease alone. (worker.suspectGracePeriod 0 turns suspicion
	// off per namespace.)
	DisableConnectionSuspicion bool `yaml:"disableConnectionSuspicion"`
}

// Server keepalive defaults: a silent peer is noticed within about three seconds, and a client
// process starved of CPU for a second (a loaded box, CPU throttling) still answers in time: its
// connection closing would make its workers suspect. The pings are HTTP/2 frames of a few
// bytes, sent only on a connection that carried nothing for a second.
const (
	KeepaliveTimeDefault    = time.Second
	KeepaliveTimeoutDefault = 2 * time.Second
)

// Server is the frontend's gRPC server: Temporal's WorkflowService and vigil's
// WorkerLivenessService on one port.
type Server struct {
	logger   *zap.Logger
	server   *grpc.Server
	listener net.Listener
	workflow *WorkflowHandler
	liveness *LivenessHandler
	done     chan struct{}
	// health answers grpc.health.v1.Health: NOT_SERVING until Start and from Stop on.
	health *health.Server
	// healthStopped ends open health watches when the server stops (a watch never ends by
	// itself, and GracefulStop waits for every open stream).
	healthStopped chan struct{}

	serveOnce sync.Once
	// ready is false until Start: calls are answered Unavailable, quickly, which the SDK
	// retries. See Serve.
	ready atomic.Bool
	// conns ties connections to workers (connection suspicion); nil when off.
	conns *connTracker
	// early refuses heartbeats in the transport while history is behind; nil without
	// Deps.Pressure. stopEarly ends its controller.
	early     *EarlyRefusal
	stopEarly context.CancelFunc
}

// NewServer listens on cfg.Address and registers both services behind Interceptors(deps).
func NewServer(cfg ServerConfig, deps Deps, workflow *WorkflowHandler, liveness *LivenessHandler) (*Server, error) {
	deps = deps.withDefaults()
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = MaxMessageSizeDefault
	}
	lis, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("frontend: listen on %s: %w", cfg.Address, err)
	}
	srv := &Server{logger: deps.Logger, listener: lis, workflow: workflow, liveness: liveness, done: make(chan struct{}),
		health: health.NewServer(), healthStopped: make(chan struct{})}
	srv.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	unary := append([]grpc.UnaryServerInterceptor{srv.readinessInterceptor}, Interceptors(deps)...)
	if reporter, ok := deps.History.(ConnectionReporter); ok && !cfg.DisableConnectionSuspicion {
		srv.conns = newConnTracker(reporter, deps.Namespaces, deps.Logger)
		// Last: only calls that passed auth and validation name workers.
		unary = append(unary, srv.conns.intercept)
	}
	if cfg.KeepaliveTime <= 0 {
		cfg.KeepaliveTime = KeepaliveTimeDefault
	}
	if cfg.KeepaliveTimeout <= 0 {
		cfg.KeepaliveTimeout = KeepaliveTimeoutDefault
	}
	keepaliveParams := keepalive.ServerParameters{Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout}
	if cfg.MaxConnectionAge > 0 {
		keepaliveParams.MaxConnectionAge = cfg.MaxConnectionAge
		keepaliveParams.MaxConnectionAgeGrace = cfg.MaxConnectionAgeGrace
	}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newRequestCodec()),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.KeepaliveParams(keepaliveParams),
		grpc.ChainStreamInterceptor(malformedStreamInterceptor, srv.healthWatchInterceptor),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(cfg.MaxMessageSize),
		grpc.MaxSendMsgSize(cfg.MaxMessageSize),
		grpc.NumStreamWorkers(streamWorkers),
		grpc.InitialConnWindowSize(connWindow),
	}
	if deps.Auth != nil {
		opts = append(opts, grpc.ChainStreamInterceptor(deps.Auth.Stream))
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	if srv.conns != nil {
		opts = append(opts, grpc.StatsHandler(srv.conns))
	}
	if deps.Pressure != nil {
		srv.early = NewEarlyRefusal(deps.Pressure, deps.TimeSource, deps.MetricsScope)
		opts = append(opts, grpc.InTapHandle(srv.early.Tap), grpc.StatsHandler(srv.early))
	}
	s := grpc.NewServer(opts...)
	workflowservice.RegisterWorkflowServiceServer(s, workflow)
	livenesspb.RegisterWorkerLivenessServiceServer(s, liveness)
	operatorservice.RegisterOperatorServiceServer(s, NewOperatorHandler(deps))
	if deps.APIKeys != nil {
		adminpb.RegisterAdminServiceServer(s, NewAdminHandler(deps))
	}
	healthpb.RegisterHealthServer(s, srv.health)
	srv.server = s
	return srv, nil
}

// streamWorkers is how many goroutines serve RPCs and are kept between them (a call finding them
// all busy gets a goroutine of its own). A fresh goroutine per call grows its stack, by copying,
// through the interceptors, the handler and the in-process history call on every heartbeat; a
// kept one has grown it already. Heartbeats wait for their commit, so enough are kept for the
// calls in flight at a host's capacity.
const streamWorkers = 256

// connWindow is the HTTP/2 receive window of a client connection: how many bytes of request
// bodies a client may have sent that the server has not acknowledged. grpc-go starts it at 64
// KiB and widens it as its bandwidth-delay estimate grows; both the acknowledgements
// (WINDOW_UPDATE frames) and the estimate's pings go out through the connection's writer
// goroutine. Under load that goroutine waits its turn for the core behind thousands of runnable
// calls, the acknowledgements lag, and the clients' request bodies wait for them, while their
// headers, which are not flow controlled, keep arriving: the early refusal then lets through
// calls whose bodies come hundreds of milliseconds later: at twice capacity most of the
// blocked calls were streams waiting for their body. With a fixed window of grpc-go's own
// ceiling for the estimate, 16 MiB, the acknowledgements are off the path: fewer heartbeats
// are outstanding, and the wait moves into admission's queue, where it is ordered and judged.
// The window allows no more unread bytes than the estimate could
// have granted, and what it lets in is bounded, as before, by the early refusal and admission.
// A stream's own window keeps its default (a larger message widens it to its size as the
// message is read).
const connWindow = 16 << 20

// errNotReady answers calls that arrive while the server starts (or stops).
var errNotReady = serviceerror.NewUnavailable("vigil is starting or stopping: retry")

// answeredWhileStarting are the calls the frontend answers alone, from its configuration:
// served before Start, so that client.Dial (GetSystemInfo, not retried by the SDK) and
// Worker.Start (DescribeNamespace) work against a server that is still starting.
var answeredWhileStarting = map[string]bool{
	"GetSystemInfo":     true,
	"DescribeNamespace": true,
	"ListNamespaces":    true,
}

// readinessInterceptor answers Unavailable until Start, except answeredWhileStarting. It runs
// before the metrics interceptor so that the start-up's refusals are not counted as the
// handlers' errors.
func (s *Server) readinessInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !s.ready.Load() && !answeredWhileStarting[operation(info.FullMethod)] && !strings.HasPrefix(info.FullMethod, healthMethodPrefix) {
		return nil, serviceerror.ToStatus(errNotReady).Err()
	}
	return handler(ctx, req)
}

// healthMethodPrefix is the health service's methods: always answered, NOT_SERVING while
// the server starts or stops.
var healthMethodPrefix = "/" + healthpb.Health_ServiceDesc.ServiceName + "/"

// HealthServices are the services grpc.health.v1.Health reports on, besides "" (the whole
// server): SERVING exactly while the server is ready.
var HealthServices = []string{
	workflowservice.WorkflowService_ServiceDesc.ServiceName,
	livenesspb.WorkerLivenessService_ServiceDesc.ServiceName,
	operatorservice.OperatorService_ServiceDesc.ServiceName,
}

func (s *Server) setHealth(status healthpb.HealthCheckResponse_ServingStatus) {
	s.health.SetServingStatus("", status)
	for _, name := range HealthServices {
		s.health.SetServingStatus(name, status)
	}
}

// healthWatchInterceptor ends a health watch when the server stops, after Shutdown has
// published NOT_SERVING to it.
func (s *Server) healthWatchInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != healthMethodPrefix+"Watch" {
		return handler(srv, ss)
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	go func() {
		select {
		case <-s.healthStopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	return handler(srv, &contextStream{ServerStream: ss, ctx: ctx})
}

// contextStream is a stream with another context.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (c *contextStream) Context() context.Context { return c.ctx }

// Address returns the address the server listens on.
func (s *Server) Address() string { return s.listener.Addr().String() }

// Serve starts serving in the background without being ready: every call is answered
// Unavailable at once until Start. A server calls it as the first thing it starts, because the
// port is bound when the Server is built: a listening port that does not serve yet holds a
// client's connection attempt (and every call waiting on it, up to the call's deadline: the
// SDK's 10 s) until it serves, where an answered connection gets a quick Unavailable, which
// the SDK retries within a few hundred milliseconds. Idempotent.
func (s *Server) Serve() {
	s.serveOnce.Do(func() {
		s.logger.Info("frontend gRPC server listening", tag.Address(s.Address()))
		go func() {
			defer close(s.done)
			if err := s.server.Serve(s.listener); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				s.logger.Error("frontend gRPC server failed", tag.Error(err))
			}
		}()
	})
}

// Start serves (if Serve was not called) and opens the server to calls: everything behind it
// must be running by then.
func (s *Server) Start() {
	s.Serve()
	if s.early != nil && s.stopEarly == nil {
		ctx, cancel := context.WithCancel(context.Background())
		s.stopEarly = cancel
		go s.early.Run(ctx)
	}
	s.ready.Store(true)
	s.workflow.deleter.start()
	s.setHealth(healthpb.HealthCheckResponse_SERVING)
}

// Stop completes open long polls, lets in-flight calls finish until ctx ends, then closes
// every connection. It must be called once, after Start.
func (s *Server) Stop(ctx context.Context) {
	s.Serve() // so that s.done closes even if Start was never called
	// New calls are refused at once while the open ones finish; health checks say so (and
	// stay NOT_SERVING: Shutdown ignores later updates), and open health watches hear it.
	s.ready.Store(false)
	if s.stopEarly != nil {
		s.stopEarly()
	}
	if s.conns != nil {
		// Before any connection closes: a stopping server is not its workers dying.
		s.conns.stop()
	}
	s.health.Shutdown()
	close(s.healthStopped)
	// Without this a graceful stop would wait up to a minute for empty polls.
	s.workflow.Stop()
	if s.liveness != nil {
		s.liveness.Stop() // and for open watches, which never end by themselves
	}
	stopped := make(chan struct{})
	go func() {
		s.server.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.server.Stop()
		<-stopped
	}
	<-s.done
}

// HTTPServer serves /healthz and /metrics.
type HTTPServer struct {
	logger   *zap.Logger
	server   *http.Server
	listener net.Listener
	done     chan struct{}
}

// HTTPOption configures NewHTTPServer.
type HTTPOption func(*httpOptions)

type httpOptions struct {
	mux *http.ServeMux
	tls *tls.Config
}

// WithPprof serves the runtime profiles under /debug/pprof/ (net/http/pprof). Off by default:
// profiles show internals and a CPU profile costs the server while it runs. guard decides who
// may read them (nil: loopback callers only); a non-nil error refuses the request with it.
func WithPprof(guard func(*http.Request) (status int, err error)) HTTPOption {
	if guard == nil {
		guard = LoopbackOnly
	}
	guarded := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if code, err := guard(r); err != nil {
				http.Error(w, err.Error(), code)
				return
			}
			h(w, r)
		}
	}
	return func(o *httpOptions) {
		o.mux.HandleFunc("/debug/pprof/", guarded(pprof.Index))
		o.mux.HandleFunc("/debug/pprof/cmdline", guarded(pprof.Cmdline))
		o.mux.HandleFunc("/debug/pprof/profile", guarded(pprof.Profile))
		o.mux.HandleFunc("/debug/pprof/symbol", guarded(pprof.Symbol))
		o.mux.HandleFunc("/debug/pprof/trace", guarded(pprof.Trace))
	}
}

// WithHTTPTLS serves HTTPS with cfg (see auth.NewServerTLSConfig).
func WithHTTPTLS(cfg *tls.Config) HTTPOption {
	return func(o *httpOptions) { o.tls = cfg }
}

// LoopbackOnly admits requests from a loopback address only: the pprof guard when auth is
// off.
func LoopbackOnly(r *http.Request) (int, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsLoopback() {
		return 0, nil
	}
	return http.StatusForbidden, errors.New("profiles are served to loopback callers only when auth is off")
}

// WithReadiness serves /readyz: 200 "ready" while ready returns nil, 503 with the error
// otherwise. /healthz says the process runs; /readyz that it serves what it should (a host
// fenced off from its shards is alive but not ready).
func WithReadiness(ready func() error) HTTPOption {
	return func(o *httpOptions) {
		o.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if err := ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprintln(w, err.Error())
				return
			}
			_, _ = fmt.Fprintln(w, "ready")
		})
	}
}

// NewHTTPServer listens on address. /metrics is served by metricsHandler (see
// metrics.NewPrometheusScope; nil: not served). /healthz answers 200 "ok" while healthy
// returns nil (nil healthy: always), 503 with the error otherwise.
func NewHTTPServer(address string, metricsHandler http.Handler, healthy func() error, logger *zap.Logger, opts ...HTTPOption) (*HTTPServer, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	lis, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("frontend: listen on %s: %w", address, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if healthy != nil {
			if err := healthy(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprintln(w, err.Error())
				return
			}
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	if metricsHandler != nil {
		mux.Handle("GET /metrics", metricsHandler)
	}
	o := httpOptions{mux: mux}
	for _, opt := range opts {
		opt(&o)
	}
	if o.tls != nil {
		lis = tls.NewListener(lis, o.tls)
	}
	return &HTTPServer{
		logger:   logger,
		server:   &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		listener: lis,
		done:     make(chan struct{}),
	}, nil
}

// Address returns the address the server listens on.
func (s *HTTPServer) Address() string { return s.listener.Addr().String() }

// Start serves in the background.
func (s *HTTPServer) Start() {
	s.logger.Info("frontend HTTP server listening", tag.Address(s.Address()))
	go func() {
		defer close(s.done)
		if err := s.server.Serve(s.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("frontend HTTP server failed", tag.Error(err))
		}
	}()
}

// Stop shuts down gracefully until ctx ends, then closes every connection.
func (s *HTTPServer) Stop(ctx context.Context) {
	if err := s.server.Shutdown(ctx); err != nil {
		_ = s.server.Close()
	}
	<-s.done
}
