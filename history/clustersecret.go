package history

import (
	"context"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// clusterSecretHeader carries the cluster secret on every call between hosts.
const clusterSecretHeader = "vigil-cluster-secret"

// ClusterSecret returns the configured secret: ClusterSecretFile's first line, else
// ClusterSecret, else "" (no check: a single host whose history port is on loopback).
func (c ServerConfig) ClusterSecret() (string, error) {
	if c.ClusterSecretFile == "" {
		return c.ClusterSecretValue, nil
	}
	b, err := os.ReadFile(c.ClusterSecretFile)
	if err != nil {
		return "", fmt.Errorf("history: cluster secret file: %w", err)
	}
	secret, _, _ := strings.Cut(string(b), "\n")
	if secret = strings.TrimSpace(secret); len(secret) < 16 {
		return "", fmt.Errorf("history: cluster secret file %s: the secret must be at least 16 characters", c.ClusterSecretFile)
	}
	return secret, nil
}

// ServerOption configures NewServer.
type ServerOption func(*serverOptions)

type serverOptions struct {
	secret string
	// relay forwards the calls another host relays through this one (relay.go); nil refuses
	// nothing and forwards nothing.
	relay *Router
}

// WithRelay makes the server forward, through r, the calls another host relays through this
// one to a shard owner it cannot reach (relay.go).
func WithRelay(r *Router) ServerOption {
	return func(o *serverOptions) { o.relay = r }
}

// WithClusterSecret makes the server refuse (Unauthenticated) every call that does not carry
// secret, as a Router built WithRouterClusterSecret sends it.
func WithClusterSecret(secret string) ServerOption {
	return func(o *serverOptions) { o.secret = secret }
}

func (o serverOptions) grpcOptions() []grpc.ServerOption {
	if o.secret == "" {
		return nil
	}
	want := []byte(o.secret)
	check := func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		got := md.Get(clusterSecretHeader)
		if len(got) != 1 || subtle.ConstantTimeCompare([]byte(got[0]), want) != 1 {
			return status.Error(codes.Unauthenticated, "history: call without the cluster secret refused")
		}
		return nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if err := check(ctx); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if err := check(ss.Context()); err != nil {
				return err
			}
			return handler(srv, ss)
		}),
	}
}

// WithRouterClusterSecret makes the router send secret on every call to another host.
func WithRouterClusterSecret(secret string) RouterOption {
	return func(r *Router) { r.secret = secret }
}

func clusterSecretDialOptions(secret string) []grpc.DialOption {
	if secret == "" {
		return nil
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, clusterSecretHeader, secret), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(metadata.AppendToOutgoingContext(ctx, clusterSecretHeader, secret), desc, cc, method, opts...)
		}),
	}
}
