package history

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip from every client
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/shard"
)

// ServiceRegistration registers one library's history gRPC service. Libraries contribute
// them through the fx group "history.services" (chasm.AsService).
type ServiceRegistration = chasm.ServiceRegistration

// Server is the history host's gRPC server.
type Server struct {
	logger   *zap.Logger
	server   *grpc.Server
	listener net.Listener
	done     chan struct{}
}

// NewServer listens on address (":0" picks a port) and registers services.
func NewServer(address string, services []ServiceRegistration, logger *zap.Logger, opts ...ServerOption) (*Server, error) {
	lis, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("history: listen on %s: %w", address, err)
	}
	return NewServerOnListener(lis, services, logger, opts...), nil
}

// NewServerOnListener serves services on lis.
func NewServerOnListener(lis net.Listener, services []ServiceRegistration, logger *zap.Logger, opts ...ServerOption) *Server {
	var o serverOptions
	for _, opt := range opts {
		opt(&o)
	}
	s := grpc.NewServer(append(o.grpcOptions(),
		grpc.ChainUnaryInterceptor(serviceErrorInterceptor, relayServerInterceptor(o.relay)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)...)
	for _, register := range services {
		register(s)
	}
	return &Server{logger: logger, server: s, listener: lis, done: make(chan struct{})}
}

// Address returns the address the server listens on.
func (s *Server) Address() string { return s.listener.Addr().String() }

// Start serves in the background.
func (s *Server) Start() {
	s.logger.Info("history gRPC server listening", tag.Address(s.Address()))
	go func() {
		defer close(s.done)
		if err := s.server.Serve(s.listener); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.logger.Error("history gRPC server failed", tag.Error(err))
		}
	}()
}

// Stop lets in-flight calls finish until ctx ends, then closes every connection.
func (s *Server) Stop(ctx context.Context) {
	stopped := make(chan struct{})
	go func() {
		s.server.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.server.Stop()
	}
	<-s.done
}

// serviceErrorInterceptor sends serviceerror values as gRPC statuses with their own code;
// returned as they are they would reach the client as Unknown, which clients retry.
func serviceErrorInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err == nil {
		return resp, nil
	}
	if _, ok := status.FromError(err); ok {
		return resp, err
	}
	return resp, serviceerror.ToStatus(err).Err()
}

// Membership says which host serves a shard.
type Membership interface {
	HostForShard(shardID int32) (address string, err error)
}

// StaticMembership serves every shard from one address: the single-host deployment.
type StaticMembership struct{ Address string }

// HostForShard implements Membership.
func (m StaticMembership) HostForShard(int32) (string, error) { return m.Address, nil }

// Address returns the local server's address ("" until it listens).
func (m *LocalMembership) Address() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.address
}

// LocalMembership serves every shard from this process's history server, whose address is
// known only once it listens. It lets components that call history (through a Router) be built
// before the server that serves them.
type LocalMembership struct {
	mu      sync.RWMutex
	address string
}

// SetAddress records the local server's address.
func (m *LocalMembership) SetAddress(address string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.address = address
}

// HostForShard implements Membership.
func (m *LocalMembership) HostForShard(int32) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.address == "" {
		return "", errors.New("the history server is not listening yet")
	}
	return m.address, nil
}

// Router is the client side of history: it maps an execution to its shard and the shard to a
// connection to the host that owns it. It never assumes a single host; Membership decides.
type Router struct {
	numShards  int32
	membership Membership
	// local, when set, serves the shards whose host is this process (see LocalConn).
	local        *LocalConn
	localAddress func() string
	// secret is sent on every call to another host (WithRouterClusterSecret).
	secret string

	scope  tally.Scope
	logger *zap.Logger

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	// lastAnswer is, by host address, when that host last answered a call (relay.go).
	lastAnswer sync.Map
	// dial maps a host's address to the address dialed for it (dialTarget; tests cut one
	// router's path to a host with it).
	dial func(address string) string
}

// RouterOption configures a Router.
type RouterOption func(*Router)

// WithLocalConn makes the router call this process's own history services in process: a shard
// whose host address equals localAddress() is served by conn.
func WithLocalConn(conn *LocalConn, localAddress func() string) RouterOption {
	return func(r *Router) { r.local, r.localAddress = conn, localAddress }
}

// NewRouter returns a router for a cluster of numShards.
func NewRouter(numShards int32, membership Membership, opts ...RouterOption) *Router {
	r := &Router{numShards: numShards, membership: membership, conns: make(map[string]*grpc.ClientConn), scope: tally.NoopScope, logger: zap.NewNop(), dial: dialTarget}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// NumShards returns the cluster's shard count.
func (r *Router) NumShards() int32 { return r.numShards }

// ShardFor returns the shard of a business ID.
func (r *Router) ShardFor(namespaceID, businessID string) int32 {
	return shard.ForKey(namespaceID, businessID, r.numShards)
}

// ConnForShard returns a connection to the shard's owner: each call goes to the host that
// owns shardID at that moment, and a call that meets the shard moving between hosts is retried
// against the next owner within its deadline.
func (r *Router) ConnForShard(shardID int32) (grpc.ClientConnInterface, error) {
	if shardID < 1 || shardID > r.numShards {
		return nil, serviceerror.NewInvalidArgument(fmt.Sprintf("shard %d is outside 1..%d", shardID, r.numShards))
	}
	return &shardConn{router: r, shardID: shardID}, nil
}

// connForShard returns the address of the host that owns shardID now, a connection to it, and
// whether it is another host.
func (r *Router) connForShard(shardID int32) (string, grpc.ClientConnInterface, bool, error) {
	address, err := r.membership.HostForShard(shardID)
	if err != nil {
		return "", nil, false, noHostError(shardID, err)
	}
	if r.local != nil && address == r.localAddress() {
		return address, r.local, false, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if conn, ok := r.conns[address]; ok {
		return address, conn, true, nil
	}
	conn, err := grpc.NewClient(r.dial(address), append(clusterSecretDialOptions(r.secret),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(statusToServiceErrorInterceptor))...)
	if err != nil {
		return "", nil, false, serviceerror.NewUnavailable(fmt.Sprintf("dial history host %s: %v", address, err))
	}
	r.conns[address] = conn
	return address, conn, true, nil
}

// ConnFor returns a connection to the host that owns the business ID's shard.
func (r *Router) ConnFor(namespaceID, businessID string) (grpc.ClientConnInterface, error) {
	return r.ConnForShard(r.ShardFor(namespaceID, businessID))
}

// Close closes every connection.
func (r *Router) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for address, conn := range r.conns {
		errs = append(errs, conn.Close())
		delete(r.conns, address)
	}
	return errors.Join(errs...)
}

// statusToServiceErrorInterceptor turns statuses back into serviceerror values, so callers
// of history can type-switch on them as on local errors.
func statusToServiceErrorInterceptor(
	ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return serviceerror.FromStatus(st)
	}
	return err
}
