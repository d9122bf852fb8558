package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/contrib/envconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	adminpb "github.com/vigilhq/vigil/api/gen/adminpb/v1"
	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

// Defaults of the connection when neither a flag, VIGIL_* nor the Temporal environment
// configuration says.
const (
	addressDefault   = "127.0.0.1:7233"
	namespaceDefault = "default"
	timeoutDefault   = 10 * time.Second
)

// Environment variables of vigil's own; each wins over its TEMPORAL_* counterpart.
const (
	envAddress   = "VIGIL_ADDRESS"
	envNamespace = "VIGIL_NAMESPACE"
	envAPIKey    = "VIGIL_API_KEY"
)

// clientFlags are the connection flags of every command that talks to a server, named as the
// temporal CLI names them. They are persistent flags of each client command group (worker,
// activity, cluster, apikey, tasktoken), so they go anywhere after the group's name.
type clientFlags struct {
	address, namespace     string
	apiKey, apiKeyFile     string
	tls                    bool
	tlsCA, tlsCert, tlsKey string
	tlsServerName          string
	tlsDisableHostVerify   bool
	profile, configFile    string
	disableConfigFile      bool
	disableConfigEnv       bool
	timeout                time.Duration
	fs                     *pflag.FlagSet
	env                    func(string) (string, bool) // os.LookupEnv; tests replace it
	resolved               *connSettings
	resolveErr             error
}

func newClientFlags() *clientFlags { return &clientFlags{env: os.LookupEnv} }

// register adds the flags to cmd's persistent flags.
func (c *clientFlags) register(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	c.fs = fs
	fs.StringVar(&c.address, "address", "", "server address host:port (default $VIGIL_ADDRESS, else the Temporal profile's address, else "+addressDefault+")")
	fs.StringVarP(&c.namespace, "namespace", "n", "", "namespace (default $VIGIL_NAMESPACE, else the Temporal profile's namespace, else "+namespaceDefault+")")
	fs.StringVar(&c.apiKey, "api-key", "", "API key or JWT, sent as \"authorization: Bearer\" (default $VIGIL_API_KEY, else the Temporal profile's API key)")
	fs.StringVar(&c.apiKeyFile, "api-key-file", "", "read the API key from this file (its first line)")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS, verifying the server with the system's CAs unless --tls-ca-path; --tls=false turns off TLS a Temporal profile asks for")
	fs.StringVar(&c.tlsCA, "tls-ca-path", "", "CA certificate (PEM) to verify the server with; implies --tls")
	fs.StringVar(&c.tlsCert, "tls-cert-path", "", "client certificate (PEM) for mTLS; implies --tls")
	fs.StringVar(&c.tlsKey, "tls-key-path", "", "the client certificate's private key (PEM)")
	fs.StringVar(&c.tlsServerName, "tls-server-name", "", "server name to verify the certificate against (default: the address's host)")
	fs.BoolVar(&c.tlsDisableHostVerify, "tls-disable-host-verification", false, "do not verify the server's certificate (testing only)")
	fs.StringVar(&c.profile, "profile", "", "profile of the Temporal configuration file (default $TEMPORAL_PROFILE, else \"default\")")
	fs.StringVar(&c.configFile, "config-file", "", "Temporal configuration file (default $TEMPORAL_CONFIG_FILE, else temporalio/temporal.toml in the user's config directory)")
	fs.BoolVar(&c.disableConfigFile, "disable-config-file", false, "do not read the Temporal configuration file")
	fs.BoolVar(&c.disableConfigEnv, "disable-config-env", false, "do not read the TEMPORAL_* environment variables")
	fs.DurationVar(&c.timeout, "timeout", timeoutDefault, "how long each call to the server may take")
	// The former names, kept working.
	alias := func(old, name string, value *string) {
		fs.StringVar(value, old, "", "former name of --"+name)
		_ = fs.MarkHidden(old)
	}
	alias("tls-ca", "tls-ca-path", &c.tlsCA)
	alias("tls-cert", "tls-cert-path", &c.tlsCert)
	alias("tls-key", "tls-key-path", &c.tlsKey)
	for _, f := range []string{"tls-ca-path", "tls-cert-path", "tls-key-path", "api-key-file", "config-file"} {
		_ = cmd.MarkPersistentFlagFilename(f)
	}
}

// changed reports whether any of the names was given on the command line.
func (c *clientFlags) changed(names ...string) bool {
	for _, n := range names {
		if f := c.fs.Lookup(n); f != nil && f.Changed {
			return true
		}
	}
	return false
}

// connSettings is where and how to connect, resolved from flags, VIGIL_* and the Temporal
// environment configuration.
type connSettings struct {
	address, namespace string
	apiKey             string
	tls                *tls.Config // nil: plaintext
	meta               map[string]string
	authority          string
}

// settings resolves the connection once: for each setting, the flag, else vigil's
// environment variable, else the Temporal profile (file, then TEMPORAL_* variables, as the
// temporal CLI reads them), else the default.
func (c *clientFlags) settings() (*connSettings, error) {
	if c.resolved != nil || c.resolveErr != nil {
		return c.resolved, c.resolveErr
	}
	c.resolved, c.resolveErr = c.resolve()
	return c.resolved, c.resolveErr
}

func (c *clientFlags) resolve() (*connSettings, error) {
	prof, err := c.temporalProfile()
	if err != nil {
		return nil, err
	}
	s := &connSettings{meta: prof.GRPCMeta, authority: prof.Authority}
	pick := func(flag, envName, fromProfile, def string) string {
		if c.changed(flag) {
			return c.fs.Lookup(flag).Value.String()
		}
		if v, ok := c.env(envName); ok && v != "" {
			return v
		}
		if fromProfile != "" {
			return fromProfile
		}
		return def
	}
	s.address = pick("address", envAddress, prof.Address, addressDefault)
	s.namespace = pick("namespace", envNamespace, prof.Namespace, namespaceDefault)

	// The API key: --api-key, --api-key-file, VIGIL_API_KEY, the profile's. A key from the
	// profile implies TLS unless the profile or a flag turns it off, as it does for the
	// temporal CLI; vigil's own key does not (a vigil host without TLS takes API keys too).
	keyFromProfile := false
	switch {
	case c.changed("api-key"):
		s.apiKey = c.apiKey
	case c.changed("api-key-file"):
		b, err := os.ReadFile(c.apiKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--api-key-file: %w", err)
		}
		s.apiKey, _, _ = strings.Cut(string(b), "\n")
	default:
		if v, ok := c.env(envAPIKey); ok && v != "" {
			s.apiKey = v
		} else if prof.APIKey != "" {
			s.apiKey, keyFromProfile = prof.APIKey, true
		}
	}
	s.apiKey = strings.TrimSpace(s.apiKey)

	// TLS: the profile's settings with the flags laid over them, field by field.
	t := prof.TLS
	if t != nil {
		cp := *t
		t = &cp
	} else if keyFromProfile {
		t = &envconfig.ClientConfigTLS{}
	}
	ensure := func() {
		if t == nil {
			t = &envconfig.ClientConfigTLS{}
		}
	}
	if c.changed("tls-ca-path", "tls-ca") {
		ensure()
		t.Disabled = false
		t.ServerCACertPath, t.ServerCACertData = c.tlsCA, nil
	}
	if c.changed("tls-cert-path", "tls-cert", "tls-key-path", "tls-key") {
		ensure()
		t.Disabled = false
		t.ClientCertPath, t.ClientCertData = c.tlsCert, nil
		t.ClientKeyPath, t.ClientKeyData = c.tlsKey, nil
	}
	if c.changed("tls-disable-host-verification") {
		ensure()
		t.DisableHostVerification = c.tlsDisableHostVerify
	}
	if c.changed("tls") {
		ensure()
		t.Disabled = !c.tls
	}
	if c.changed("tls-server-name") && t != nil {
		t.ServerName = c.tlsServerName
	}
	if t != nil && !t.Disabled {
		opts, err := (&envconfig.ClientConfigProfile{TLS: t}).ToClientOptions(envconfig.ToClientOptionsRequest{})
		if err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		s.tls = opts.ConnectionOptions.TLS
		s.tls.MinVersion = tls.VersionTLS12
	}
	return s, nil
}

// temporalProfile reads the Temporal environment configuration: the profile of the
// configuration file (unless --disable-config-file), then the TEMPORAL_* variables over it
// (unless --disable-config-env). A missing file is no error; a profile named but not found is.
func (c *clientFlags) temporalProfile() (envconfig.ClientConfigProfile, error) {
	if c.disableConfigFile && c.disableConfigEnv {
		return envconfig.ClientConfigProfile{}, nil
	}
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{
		ConfigFilePath:    c.configFile,
		ConfigFileProfile: c.profile,
		DisableFile:       c.disableConfigFile,
		DisableEnv:        c.disableConfigEnv,
		EnvLookup:         envLookup{c.env},
	})
	if err != nil {
		return envconfig.ClientConfigProfile{}, fmt.Errorf("temporal environment configuration: %w", err)
	}
	return prof, nil
}

// envLookup adapts a lookup function to envconfig.EnvLookup. A variable set to "" counts as
// unset, as envconfig documents (and as VIGIL_* are read).
type envLookup struct{ lookup func(string) (string, bool) }

func (e envLookup) LookupEnv(k string) (string, bool) {
	v, ok := e.lookup(k)
	return v, ok && v != ""
}

func (e envLookup) Environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := e.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// conn dials the resolved server. Nothing is sent until the first call.
func (c *clientFlags) conn() (*grpc.ClientConn, error) {
	s, err := c.settings()
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if s.tls != nil {
		creds = credentials.NewTLS(s.tls)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if s.authority != "" {
		opts = append(opts, grpc.WithAuthority(s.authority))
	}
	var md []string
	for k, v := range s.meta {
		md = append(md, k, v)
	}
	if s.apiKey != "" {
		md = append(md, "authorization", "Bearer "+s.apiKey)
	}
	if len(md) > 0 {
		add := func(ctx context.Context) context.Context { return metadata.AppendToOutgoingContext(ctx, md...) }
		opts = append(opts,
			grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
				return invoker(add(ctx), method, req, reply, cc, callOpts...)
			}),
			grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(add(ctx), desc, cc, method, callOpts...)
			}))
	}
	return grpc.NewClient(s.address, opts...)
}

// callContext is the context of one call to the server: --timeout from ctx.
func (c *clientFlags) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// clients is a connection's service clients.
type clients struct {
	conn     *grpc.ClientConn
	liveness livenesspb.WorkerLivenessServiceClient
	admin    adminpb.AdminServiceClient
	workflow workflowservice.WorkflowServiceClient
	ns       string
}

func (c *clients) Close() { _ = c.conn.Close() }

// dial connects and returns the service clients and the resolved namespace.
func (c *clientFlags) dial() (*clients, error) {
	conn, err := c.conn()
	if err != nil {
		return nil, err
	}
	s, _ := c.settings()
	return &clients{
		conn:     conn,
		liveness: livenesspb.NewWorkerLivenessServiceClient(conn),
		admin:    adminpb.NewAdminServiceClient(conn),
		workflow: workflowservice.NewWorkflowServiceClient(conn),
		ns:       s.namespace,
	}, nil
}

// call runs f with the printer of -o, the server's clients and the context of one call
// (--timeout): what every command that asks the server something starts with.
func call(cmd *cobra.Command, cf *clientFlags, out *outputFlags, f func(ctx context.Context, c *clients, p *printer) error) error {
	p, err := out.printer(cmd)
	if err != nil {
		return err
	}
	c, err := cf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := cf.callContext(cmd.Context())
	defer cancel()
	return f(ctx, c, p)
}
