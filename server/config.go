// Package server assembles frontend, history and the component libraries into one vigil
// process with fx, from a static configuration (YAML and flags).
package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vigilhq/vigil/common/log"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/persistence/persistencefx"
)

// Defaults follow `temporal server start-dev`, so SDKs and the temporal CLI find vigil where
// they look for a dev server.
const (
	DefaultIP       = "127.0.0.1"
	DefaultPort     = 7233
	DefaultHTTPPort = 7243
	DefaultDBFile   = "vigil.db"
)

// Config is vigil's static configuration. Zero values mean the defaults above.
type Config struct {
	Frontend struct {
		// Address is where SDKs and the CLI connect (gRPC).
		Address string `yaml:"address"`
		// HTTPAddress serves /metrics and /healthz.
		HTTPAddress    string `yaml:"httpAddress"`
		MaxMessageSize int    `yaml:"maxMessageSize"`
		// Pprof also serves Go's runtime profiles under /debug/pprof/ on HTTPAddress.
		Pprof bool `yaml:"pprof"`
		// KeepaliveTime and KeepaliveTimeout: the server pings a connection silent for
		// KeepaliveTime and closes it when no answer comes within KeepaliveTimeout, so a worker
		// whose machine went away is suspected within about their sum (default 1s + 2s).
		KeepaliveTime    time.Duration `yaml:"keepaliveTime"`
		KeepaliveTimeout time.Duration `yaml:"keepaliveTimeout"`
		// MaxConnectionAge (with MaxConnectionAgeGrace) closes older connections with GOAWAY;
		// zero: never.
		MaxConnectionAge      time.Duration `yaml:"maxConnectionAge"`
		MaxConnectionAgeGrace time.Duration `yaml:"maxConnectionAgeGrace"`
		// DisableConnectionSuspicion: dead workers are found by their lease alone (see
		// docs/concepts.md, "Connection suspicion"; worker.suspectGracePeriod 0 does the same
		// per namespace).
		DisableConnectionSuspicion bool `yaml:"disableConnectionSuspicion"`
	} `yaml:"frontend"`
	History       history.Config       `yaml:"history"`
	HistoryServer history.ServerConfig `yaml:"historyServer"`
	// Cluster names this host among the hosts sharing one PostgreSQL database (ignored on
	// SQLite, which is always a cluster of one).
	Cluster     history.ClusterConfig `yaml:"cluster"`
	Persistence persistencefx.Config  `yaml:"persistence"`
	// Namespaces served besides "default", which always exists. Each is created in the store
	// at start when missing; namespaces registered at run time (RegisterNamespace) are served
	// too.
	Namespaces []namespace.Config `yaml:"namespaces"`
	Log        log.Config         `yaml:"log"`
	// Metrics are always served in the Prometheus format on the HTTP port's /metrics;
	// Metrics.OTLP also pushes them to an OpenTelemetry collector.
	Metrics metrics.Config `yaml:"metrics"`
	// Auth turns authentication and authorization on (off by default); see docs/security.md.
	Auth auth.Config `yaml:"auth"`
	// TLS is served on the frontend's gRPC port and its HTTP port (client certificates are
	// optional on the HTTP port, so /metrics and /healthz stay reachable).
	TLS auth.TLSConfig `yaml:"tls"`
	// DynamicConfigFile is polled for changes; empty means every setting at its default (plus
	// DynamicConfigValues).
	DynamicConfigFile string `yaml:"dynamicConfigFile"`
	// DynamicConfigValues are KEY=JSON overrides (the --dynamic-config-value flag); they win over
	// the file.
	DynamicConfigValues []string `yaml:"dynamicConfigValues"`
}

// LoadConfig reads a YAML file; unknown fields are an error, so a typo is not silently ignored.
func LoadConfig(path string) (Config, error) {
	var cfg Config
	f, err := os.Open(path)
	if err != nil {
		return cfg, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) { // EOF: an empty file
		return cfg, fmt.Errorf("parse config %s: %w", path, err)
	}
	return cfg, nil
}

// withDefaults fills unset fields.
func (c Config) withDefaults() Config {
	if c.Frontend.Address == "" {
		c.Frontend.Address = fmt.Sprintf("%s:%d", DefaultIP, DefaultPort)
	}
	if c.Frontend.HTTPAddress == "" {
		c.Frontend.HTTPAddress = fmt.Sprintf("%s:%d", DefaultIP, DefaultHTTPPort)
	}
	if c.Cluster.HostID == "" {
		c.Cluster.HostID = c.History.HostID
	}
	if c.Cluster.HostID == "" {
		c.Cluster.HostID = defaultHostID(c.Frontend.Address)
	}
	if (c.Persistence.Driver == "" || c.Persistence.Driver == "sqlite") && c.Persistence.SQLite.Path == "" {
		c.Persistence.SQLite.Path = filepath.Join(DefaultDataDir(), DefaultDBFile)
	}
	return c
}

// defaultHostID is hostname:port of the frontend: unique among hosts of one machine, and
// stable across a host's restarts.
func defaultHostID(frontendAddress string) string {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "localhost"
	}
	_, port, err := net.SplitHostPort(frontendAddress)
	if err != nil {
		return name
	}
	return net.JoinHostPort(name, port)
}

// DefaultDataDir is where vigil keeps its database by default: $XDG_DATA_HOME/vigil, else
// ~/.local/share/vigil, else ./vigil-data.
func DefaultDataDir() string {
	if dir := os.Getenv("XDG_DATA_HOME"); dir != "" {
		return filepath.Join(dir, "vigil")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "vigil")
	}
	return "vigil-data"
}
