// Package testcluster runs a whole vigil server in-process for functional tests: a temporary
// SQLite file, free ports, per-test dynamic config, real time.
package testcluster

import (
	"cmp"
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/server"
)

// Options configure a cluster.
type Options struct {
	// DynamicConfig values applied before start (key → value as in a dynamic config file).
	DynamicConfig map[dynamicconfig.Key]any
	// Namespaces besides "default".
	Namespaces []string
	// NumShards defaults to 4.
	NumShards int32
	// Path of the database; default a fresh file. Reuse one to restart a cluster.
	Path string
	// Postgres, when set, is the database of the host instead of SQLite (see NewPostgres).
	Postgres *Postgres
	// HostID names the host in a PostgreSQL cluster (default "host-1").
	HostID string
	// Auth and TLS are the server's static auth and TLS configuration (default: off).
	Auth auth.Config
	TLS  auth.TLSConfig
	// SlowWrites, when set, slows every write to the store by its delay per execution
	// written: the test hook for an overloaded write path.
	SlowWrites *SlowWrites
	// Configure, when set, changes the server's static configuration last (e.g. a fixed
	// frontend address to restart on, the frontend's connection settings).
	Configure func(*ServerConfig)
}

// ServerConfig is the server's static configuration.
type ServerConfig = server.Config

// SlowWrites slows the store's batch writes by Delay per execution written; change it at any
// time (0: full speed).
type SlowWrites struct{ delay atomic.Int64 }

// Set changes the delay per execution written.
func (s *SlowWrites) Set(d time.Duration) { s.delay.Store(int64(d)) }

type slowStore struct {
	persistence.Store
	slow *SlowWrites
}

type slowMemberStore struct {
	*slowStore
	persistence.MembershipStore
}

func (s *slowStore) WriteBatch(ctx context.Context, writes []*persistence.ExecutionWrite) ([]error, error) {
	if d := time.Duration(s.slow.delay.Load()); d > 0 {
		time.Sleep(d * time.Duration(len(writes)))
	}
	return s.Store.WriteBatch(ctx, writes)
}

// Cluster is a running vigil server.
type Cluster struct {
	t       testing.TB
	srv     *server.Server
	dc      *dynamicconfig.MemoryClient
	path    string
	stopped bool
}

// New starts a cluster that stops when the test ends.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.NumShards == 0 {
		opts.NumShards = 4
	}
	if opts.Path == "" {
		opts.Path = filepath.Join(t.TempDir(), "vigil.db")
	}
	dc := dynamicconfig.NewMemoryClient()
	dc.OverrideValue(dynamicconfig.StateGaugeInterval.Key(), "200ms") // tests read the gauges
	for key, value := range opts.DynamicConfig {
		dc.OverrideValue(key, value)
	}
	var cfg server.Config
	cfg.Frontend.Address = "127.0.0.1:0"
	cfg.Frontend.HTTPAddress = "127.0.0.1:0"
	cfg.History.NumShards = opts.NumShards
	cfg.Persistence.SQLite.Path = opts.Path
	if opts.Postgres != nil {
		cfg.Persistence.Driver = "postgres"
		cfg.Persistence.Postgres.DSN = opts.Postgres.DSN
		cfg.Persistence.Postgres.Schema = opts.Postgres.Schema
		cfg.Cluster.HostID = cmp.Or(opts.HostID, "host-1")
		cfg.Cluster.MembershipHeartbeat = opts.Postgres.MembershipHeartbeat
		cfg.Cluster.MembershipTTL = opts.Postgres.MembershipTTL
	}
	cfg.Auth = opts.Auth
	cfg.TLS = opts.TLS
	for _, name := range opts.Namespaces {
		cfg.Namespaces = append(cfg.Namespaces, namespace.Config{Name: name})
	}
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	serverOpts := []server.Option{
		server.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))),
		server.WithDynamicConfigClient(dc),
	}
	if opts.SlowWrites != nil {
		serverOpts = append(serverOpts, server.WithFxOptions(fx.Decorate(func(s persistence.Store) persistence.Store {
			slowed := &slowStore{Store: s, slow: opts.SlowWrites}
			if m, ok := s.(persistence.MembershipStore); ok {
				// Still a store that hosts share: a slowed host stays a member of its cluster.
				return &slowMemberStore{slowStore: slowed, MembershipStore: m}
			}
			return slowed
		})))
	}
	srv, err := server.New(cfg, serverOpts...)
	if err != nil {
		t.Fatalf("testcluster: build server: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("testcluster: start server: %v", err)
	}
	c := &Cluster{t: t, srv: srv, dc: dc, path: opts.Path}
	t.Cleanup(c.Stop)
	return c
}

// Server is the running server.
func (c *Cluster) Server() *server.Server { return c.srv }

// Crash stops the host as a crash would look to the others of its cluster: no handoff, no
// membership leave. It is idempotent with Stop.
func (c *Cluster) Crash() {
	if c.stopped {
		return
	}
	c.stopped = true
	c.srv.Crash()
}

// Address is the frontend address SDK clients dial.
func (c *Cluster) Address() string { return c.srv.FrontendAddress() }

// HTTPAddress serves /metrics and /healthz.
func (c *Cluster) HTTPAddress() string { return c.srv.HTTPAddress() }

// Path is the database file.
func (c *Cluster) Path() string { return c.path }

// DynamicConfig lets a test change settings while the cluster runs.
func (c *Cluster) DynamicConfig() *dynamicconfig.MemoryClient { return c.dc }

// Stop stops the cluster; it is idempotent.
func (c *Cluster) Stop() {
	if c.stopped {
		return
	}
	c.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.srv.Stop(ctx); err != nil {
		c.t.Errorf("testcluster: stop: %v", err)
	}
}
