package frontend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // the SDK compresses every request with gzip
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
}

// Server is the frontend's gRPC server: Temporal's WorkflowService and vigil's
// WorkerLivenessService on one port.
type Server struct {
	logger   *zap.Logger
	server   *grpc.Server
	listener net.Listener
	workflow *WorkflowHandler
	liveness *LivenessHandler
	done     chan struct{}

	serveOnce sync.Once
	// ready is false until Start: calls are answered Unavailable, quickly, which the SDK
	// retries. See Serve.
	ready atomic.Bool
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
	srv := &Server{logger: deps.Logger, listener: lis, workflow: workflow, liveness: liveness, done: make(chan struct{})}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newRequestCodec()),
		grpc.ChainUnaryInterceptor(append([]grpc.UnaryServerInterceptor{srv.readinessInterceptor}, Interceptors(deps)...)...),
		grpc.ChainStreamInterceptor(malformedStreamInterceptor),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(cfg.MaxMessageSize),
		grpc.MaxSendMsgSize(cfg.MaxMessageSize),
	}
	if deps.Auth != nil {
		opts = append(opts, grpc.ChainStreamInterceptor(deps.Auth.Stream))
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	s := grpc.NewServer(opts...)
	workflowservice.RegisterWorkflowServiceServer(s, workflow)
	livenesspb.RegisterWorkerLivenessServiceServer(s, liveness)
	if deps.APIKeys != nil {
		adminpb.RegisterAdminServiceServer(s, NewAdminHandler(deps))
	}
	srv.server = s
	return srv, nil
}

// errNotReady answers calls that arrive while the server starts (or stops).
var errNotReady = serviceerror.NewUnavailable("vigil is starting or stopping: retry")

// answeredWhileStarting are the calls the frontend answers alone, from its configuration:
// served before Start, so that client.Dial (GetSystemInfo, not retried by the SDK) and
// Worker.Start (DescribeNamespace) work against a server that is still starting.
var answeredWhileStarting = map[string]bool{
	"GetSystemInfo":     true,
	"DescribeNamespace": true,
}

// readinessInterceptor answers Unavailable until Start, except answeredWhileStarting. It runs
// before the metrics interceptor so that the start-up's refusals are not counted as the
// handlers' errors.
func (s *Server) readinessInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !s.ready.Load() && !answeredWhileStarting[operation(info.FullMethod)] {
		return nil, serviceerror.ToStatus(errNotReady).Err()
	}
	return handler(ctx, req)
}

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
	s.ready.Store(true)
}

// Stop completes open long polls, lets in-flight calls finish until ctx ends, then closes
// every connection. It must be called once, after Start.
func (s *Server) Stop(ctx context.Context) {
	s.Serve() // so that s.done closes even if Start was never called
	// New calls are refused at once while the open ones finish.
	s.ready.Store(false)
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
