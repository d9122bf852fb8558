package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/server"
)

// repeated is a flag that may be given many times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func serverStart(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil server start", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configPath = fs.String("config", "", "static configuration YAML file (flags override it)")
		ip         = fs.String("ip", server.DefaultIP, "IP address to listen on")
		port       = fs.Int("port", server.DefaultPort, "gRPC port for SDKs and the temporal CLI")
		httpPort   = fs.Int("http-port", server.DefaultHTTPPort, "HTTP port for /metrics and /healthz")
		dbFilename = fs.String("db-filename", "", "SQLite database file (default "+server.DefaultDataDir()+"/"+server.DefaultDBFile+")")
		dcFile     = fs.String("dynamic-config-file", "", "dynamic configuration YAML file, reloaded when it changes")
		logLevel   = fs.String("log-level", "", "debug, info, warn or error (default info)")
		logFormat  = fs.String("log-format", "", "json or pretty (default: pretty when stderr, where logs go, is a terminal, else json)")
		otlpAddr   = fs.String("otlp-endpoint", "", "also push metrics over OTLP to this collector host:port (e.g. 127.0.0.1:4317)")
		otlpProto  = fs.String("otlp-protocol", "", "OTLP protocol: grpc (default) or http")
		otlpInsec  = fs.Bool("otlp-insecure", false, "push OTLP without TLS")
		pprofOn    = fs.Bool("pprof", false, "also serve Go runtime profiles under /debug/pprof/ on the HTTP port")
		pgDSN      = fs.String("postgres-dsn", "", "PostgreSQL connection string: hosts started on one database form a cluster")
		histPort   = fs.Int("history-port", 0, "port of the history RPCs other hosts of the cluster call (default: a free port)")
		authOn     = fs.Bool("auth", false, "require authentication (API keys, JWTs, client certificates) and authorize every call by role")
		adminKey   = fs.String("admin-api-key-file", "", "file holding a cluster admin API key (first line); implies --auth")
		tlsCert    = fs.String("tls-cert", "", "serve TLS on the gRPC and HTTP ports with this certificate (PEM), reloaded when it changes")
		tlsKey     = fs.String("tls-key", "", "the certificate's private key (PEM)")
		tlsCA      = fs.String("tls-client-ca", "", "verify client certificates against these CAs (PEM); a verified certificate names the principal (mTLS)")
		tlsReq     = fs.Bool("tls-require-client-cert", false, "refuse gRPC connections without a valid client certificate")
		jwksFile   = fs.String("jwks-file", "", "JSON Web Key Set to verify bearer JWTs with, reloaded when it changes; implies --auth")
		dcValues   repeated
		namespaces repeated
	)
	fs.Var(&dcValues, "dynamic-config-value", "dynamic config override KEY=JSON, e.g. matching.InactiveWorkerCleanupDelay='\"5m\"' (repeatable)")
	fs.Var(&namespaces, "namespace", "an extra namespace to serve besides default (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vigil server start: unexpected argument %q (flags start with --)\n", fs.Arg(0))
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var cfg server.Config
	if *configPath != "" {
		var err error
		if cfg, err = server.LoadConfig(*configPath); err != nil {
			fmt.Fprintln(stderr, "vigil:", err)
			return 1
		}
	}
	if set["ip"] || set["port"] || cfg.Frontend.Address == "" {
		cfg.Frontend.Address = fmt.Sprintf("%s:%d", *ip, *port)
	}
	if set["ip"] || set["http-port"] || cfg.Frontend.HTTPAddress == "" {
		cfg.Frontend.HTTPAddress = fmt.Sprintf("%s:%d", *ip, *httpPort)
	}
	if *dbFilename != "" {
		cfg.Persistence.Driver = "sqlite"
		cfg.Persistence.SQLite.Path = *dbFilename
	}
	if *pgDSN != "" {
		cfg.Persistence.Driver = "postgres"
		cfg.Persistence.Postgres.DSN = *pgDSN
	}
	if set["history-port"] || (set["ip"] && cfg.HistoryServer.Address == "") {
		cfg.HistoryServer.Address = fmt.Sprintf("%s:%d", *ip, *histPort)
	}
	if *dcFile != "" {
		cfg.DynamicConfigFile = *dcFile
	}
	if *pprofOn {
		cfg.Frontend.Pprof = true
	}
	if *logLevel != "" {
		cfg.Log.Level = *logLevel
	}
	if *logFormat != "" {
		cfg.Log.Format = *logFormat
	}
	if *otlpAddr != "" {
		cfg.Metrics.OTLP.Endpoint = *otlpAddr
	}
	if *otlpProto != "" {
		cfg.Metrics.OTLP.Protocol = *otlpProto
	}
	if *otlpInsec {
		cfg.Metrics.OTLP.Insecure = true
	}
	if *tlsCert != "" {
		cfg.TLS.CertFile = *tlsCert
	}
	if *tlsKey != "" {
		cfg.TLS.KeyFile = *tlsKey
	}
	if *tlsCA != "" {
		cfg.TLS.ClientCAFile = *tlsCA
	}
	if *tlsReq {
		cfg.TLS.RequireClientCert = true
	}
	if *adminKey != "" {
		cfg.Auth.AdminAPIKeyFile = *adminKey
	}
	if *jwksFile != "" {
		cfg.Auth.JWT.JWKSFile = *jwksFile
	}
	if *authOn || *adminKey != "" || *jwksFile != "" {
		cfg.Auth.Enabled = true
	}
	cfg.DynamicConfigValues = append(cfg.DynamicConfigValues, dcValues...)
	for _, ns := range namespaces {
		cfg.Namespaces = append(cfg.Namespaces, namespace.Config{Name: ns})
	}

	srv, err := server.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := srv.Start(ctx); err != nil {
		fmt.Fprintln(stderr, "vigil: start:", err)
		return 1
	}
	fmt.Fprintf(stdout, "vigil %s serving: gRPC %s, HTTP %s (metrics, health)\n", version, srv.FrontendAddress(), srv.HTTPAddress())
	<-ctx.Done()
	fmt.Fprintln(stdout, "vigil: stopping")
	stopCtx, cancel := context.WithTimeout(context.Background(), server.StopTimeoutDefault)
	defer cancel()
	if err := srv.Stop(stopCtx); err != nil {
		fmt.Fprintln(stderr, "vigil: stop:", err)
		return 1
	}
	return 0
}
