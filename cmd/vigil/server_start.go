package main

import (
	"context"
	"fmt"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigilhq/vigil/common/buildinfo"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/server"
)

func newServerCmd() *cobra.Command {
	return newGroup("server", "Run the vigil server", newServerStartCmd())
}

func newServerStartCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Run the server",
		Long: `Run the vigil server until SIGINT or SIGTERM: the gRPC port SDK workers and the temporal CLI
connect to, and the HTTP port with /metrics, /healthz and the live page. Flags override the
--config file. Logs go to stderr, as JSON lines unless stderr is a terminal or --log-format
console.`,
		Example: `  vigil server start
  vigil server start --db-filename /var/lib/vigil/vigil.db --log-format json
  vigil server start --postgres-dsn "$DSN" --port 7233 --http-port 7243 --history-port 7253`,
		Args: noArgs,
	}
	var (
		configPath, ip, dbFilename, dcFile, logLevel, logFormat string
		otlpAddr, otlpProto, pgDSN, adminKey                    string
		tlsCert, tlsKey, tlsCA, jwksFile                        string
		port, httpPort, histPort                                int
		otlpInsec, pprofOn, authOn, tlsReq                      bool
		dcValues, namespaces                                    []string
	)
	fs := cmd.Flags()
	fs.StringVar(&configPath, "config", "", "static configuration YAML file (flags override it)")
	fs.StringVar(&ip, "ip", server.DefaultIP, "IP address to listen on")
	fs.IntVar(&port, "port", server.DefaultPort, "gRPC port for SDKs and the temporal CLI")
	fs.IntVar(&httpPort, "http-port", server.DefaultHTTPPort, "HTTP port for /metrics and /healthz")
	// The default is named, not resolved: the help, and docs/cli.md made from it, must read the
	// same for every user.
	fs.StringVar(&dbFilename, "db-filename", "", "SQLite database file (default: "+server.DefaultDBFile+" in $XDG_DATA_HOME/vigil, else ~/.local/share/vigil)")
	fs.StringVar(&dcFile, "dynamic-config-file", "", "dynamic configuration YAML file, reloaded when it changes")
	fs.StringVar(&logLevel, "log-level", "", "debug, info, warn or error (default info)")
	fs.StringVar(&logFormat, "log-format", "", "json (one object per line) or console (human-readable; \"pretty\" is another name) (default: console when stderr, where logs go, is a terminal, else json)")
	fs.StringVar(&otlpAddr, "otlp-endpoint", "", "also push metrics over OTLP to this collector host:port (e.g. 127.0.0.1:4317)")
	fs.StringVar(&otlpProto, "otlp-protocol", "", "OTLP protocol: grpc (default) or http")
	fs.BoolVar(&otlpInsec, "otlp-insecure", false, "push OTLP without TLS")
	fs.BoolVar(&pprofOn, "pprof", false, "also serve Go runtime profiles under /debug/pprof/ on the HTTP port")
	fs.StringVar(&pgDSN, "postgres-dsn", "", "PostgreSQL connection string: hosts started on one database form a cluster")
	fs.IntVar(&histPort, "history-port", 0, "port of the history RPCs other hosts of the cluster call (default: a free port)")
	fs.BoolVar(&authOn, "auth", false, "require authentication (API keys, JWTs, client certificates) and authorize every call by role")
	fs.StringVar(&adminKey, "admin-api-key-file", "", "file holding a cluster admin API key (first line); implies --auth")
	fs.StringVar(&tlsCert, "tls-cert", "", "serve TLS on the gRPC and HTTP ports with this certificate (PEM), reloaded when it changes")
	fs.StringVar(&tlsKey, "tls-key", "", "the certificate's private key (PEM)")
	fs.StringVar(&tlsCA, "tls-client-ca", "", "verify client certificates against these CAs (PEM); a verified certificate names the principal (mTLS)")
	fs.BoolVar(&tlsReq, "tls-require-client-cert", false, "refuse gRPC connections without a valid client certificate")
	fs.StringVar(&jwksFile, "jwks-file", "", "JSON Web Key Set to verify bearer JWTs with, reloaded when it changes; implies --auth")
	fs.StringArrayVar(&dcValues, "dynamic-config-value", nil, "dynamic config override KEY=JSON, e.g. matching.InactiveWorkerCleanupDelay='\"5m\"' (repeatable)")
	fs.StringArrayVar(&namespaces, "namespace", nil, "an extra namespace to serve besides default (repeatable)")
	for _, f := range []string{"config", "db-filename", "dynamic-config-file", "admin-api-key-file", "tls-cert", "tls-key", "tls-client-ca", "jwks-file"} {
		_ = cmd.MarkFlagFilename(f)
	}
	_ = cmd.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"json", "console"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = runner(func(cmd *cobra.Command, _ []string) error {
		stdout := cmd.OutOrStdout()
		set := map[string]bool{}
		fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })

		var cfg server.Config
		if configPath != "" {
			var err error
			if cfg, err = server.LoadConfig(configPath); err != nil {
				return err
			}
		}
		if set["ip"] || set["port"] || cfg.Frontend.Address == "" {
			cfg.Frontend.Address = fmt.Sprintf("%s:%d", ip, port)
		}
		if set["ip"] || set["http-port"] || cfg.Frontend.HTTPAddress == "" {
			cfg.Frontend.HTTPAddress = fmt.Sprintf("%s:%d", ip, httpPort)
		}
		if dbFilename != "" {
			cfg.Persistence.Driver = "sqlite"
			cfg.Persistence.SQLite.Path = dbFilename
		}
		if pgDSN != "" {
			cfg.Persistence.Driver = "postgres"
			cfg.Persistence.Postgres.DSN = pgDSN
		}
		if set["history-port"] || (set["ip"] && cfg.HistoryServer.Address == "") {
			cfg.HistoryServer.Address = fmt.Sprintf("%s:%d", ip, histPort)
		}
		if dcFile != "" {
			cfg.DynamicConfigFile = dcFile
		}
		if pprofOn {
			cfg.Frontend.Pprof = true
		}
		if logLevel != "" {
			cfg.Log.Level = logLevel
		}
		if logFormat != "" {
			cfg.Log.Format = logFormat
		}
		if otlpAddr != "" {
			cfg.Metrics.OTLP.Endpoint = otlpAddr
		}
		if otlpProto != "" {
			cfg.Metrics.OTLP.Protocol = otlpProto
		}
		if otlpInsec {
			cfg.Metrics.OTLP.Insecure = true
		}
		if tlsCert != "" {
			cfg.TLS.CertFile = tlsCert
		}
		if tlsKey != "" {
			cfg.TLS.KeyFile = tlsKey
		}
		if tlsCA != "" {
			cfg.TLS.ClientCAFile = tlsCA
		}
		if tlsReq {
			cfg.TLS.RequireClientCert = true
		}
		if adminKey != "" {
			cfg.Auth.AdminAPIKeyFile = adminKey
		}
		if jwksFile != "" {
			cfg.Auth.JWT.JWKSFile = jwksFile
		}
		if authOn || adminKey != "" || jwksFile != "" {
			cfg.Auth.Enabled = true
		}
		cfg.DynamicConfigValues = append(cfg.DynamicConfigValues, dcValues...)
		for _, ns := range namespaces {
			cfg.Namespaces = append(cfg.Namespaces, namespace.Config{Name: ns})
		}

		// A soft memory limit of 90 % of the container's (its cgroup's) unless GOMEMLIMIT is
		// set, so that the collector works harder before the kernel's OOM killer would.
		_, _ = memlimit.Set(memlimit.WithProvider(memlimit.FromCgroup))
		srv, err := server.New(cfg)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if err := srv.Start(ctx); err != nil {
			return fmt.Errorf("start: %w", err)
		}
		fmt.Fprintf(stdout, "vigil %s serving: gRPC %s, HTTP %s (metrics, health)\n", buildinfo.Get().Version, srv.FrontendAddress(), srv.HTTPAddress())
		<-ctx.Done()
		fmt.Fprintln(stdout, "vigil: stopping")
		stopCtx, cancel := context.WithTimeout(context.Background(), server.StopTimeoutDefault)
		defer cancel()
		if err := srv.Stop(stopCtx); err != nil {
			return fmt.Errorf("stop: %w", err)
		}
		return nil
	})
	return cmd
}
