package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	adminpb "github.com/vigilhq/vigil/api/gen/adminpb/v1"
	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

// clientFlags are the connection flags every vigil client command accepts, named as the
// temporal CLI names them.
type clientFlags struct {
	address       *string
	namespace     *string
	apiKey        *string
	apiKeyFile    *string
	tlsCA         *string
	tlsCert       *string
	tlsKey        *string
	tlsServerName *string
	tls           *bool
}

func addClientFlags(fs *flag.FlagSet) clientFlags {
	return clientFlags{
		address:       fs.String("address", "127.0.0.1:7233", "vigil frontend address"),
		namespace:     fs.String("namespace", "default", "namespace"),
		apiKey:        fs.String("api-key", os.Getenv("VIGIL_API_KEY"), "API key or JWT sent as \"authorization: Bearer\" (default $VIGIL_API_KEY)"),
		apiKeyFile:    fs.String("api-key-file", "", "read the API key from this file (first line)"),
		tlsCA:         fs.String("tls-ca", "", "CA certificate (PEM) to verify the server with; implies --tls"),
		tlsCert:       fs.String("tls-cert", "", "client certificate (PEM) for mTLS; implies --tls"),
		tlsKey:        fs.String("tls-key", "", "client certificate's private key (PEM)"),
		tlsServerName: fs.String("tls-server-name", "", "server name to verify the certificate against (default: the address's host)"),
		tls:           fs.Bool("tls", false, "connect with TLS, verifying the server with the system's CAs unless --tls-ca"),
	}
}

func (c clientFlags) conn() (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if *c.tls || *c.tlsCA != "" || *c.tlsCert != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: *c.tlsServerName}
		if *c.tlsCA != "" {
			pem, err := os.ReadFile(*c.tlsCA)
			if err != nil {
				return nil, fmt.Errorf("--tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--tls-ca %s: no PEM certificate found", *c.tlsCA)
			}
			cfg.RootCAs = pool
		}
		if *c.tlsCert != "" || *c.tlsKey != "" {
			cert, err := tls.LoadX509KeyPair(*c.tlsCert, *c.tlsKey)
			if err != nil {
				return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		creds = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	key := *c.apiKey
	if *c.apiKeyFile != "" {
		b, err := os.ReadFile(*c.apiKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--api-key-file: %w", err)
		}
		key, _, _ = strings.Cut(string(b), "\n")
	}
	if key = strings.TrimSpace(key); key != "" {
		opts = append(opts, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key), method, req, reply, cc, callOpts...)
		}))
	}
	return grpc.NewClient(*c.address, opts...)
}

func (c clientFlags) dial() (livenesspb.WorkerLivenessServiceClient, func(), error) {
	conn, err := c.conn()
	if err != nil {
		return nil, nil, err
	}
	return livenesspb.NewWorkerLivenessServiceClient(conn), func() { _ = conn.Close() }, nil
}

func (c clientFlags) dialAdmin() (adminpb.AdminServiceClient, func(), error) {
	conn, err := c.conn()
	if err != nil {
		return nil, nil, err
	}
	return adminpb.NewAdminServiceClient(conn), func() { _ = conn.Close() }, nil
}
