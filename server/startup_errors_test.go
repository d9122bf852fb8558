package server

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/dynamicconfig"
)

func testConfig(t *testing.T, path string) Config {
	var cfg Config
	cfg.Frontend.Address = "127.0.0.1:0"
	cfg.Frontend.HTTPAddress = "127.0.0.1:0"
	cfg.History.NumShards = 2
	cfg.Persistence.SQLite.Path = path
	return cfg
}

func newTestServer(t *testing.T, cfg Config) (*Server, error) {
	return New(cfg, WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))),
		WithDynamicConfigClient(dynamicconfig.NewMemoryClient()))
}

// TestAddressInUseIsOneLine: a port another process holds is reported as such, naming the flag
// to change, without fx's and dig's account of which constructor failed.
func TestAddressInUseIsOneLine(t *testing.T) {
	t.Parallel()

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()

	for _, tt := range []struct {
		name string
		set  func(*Config)
		flag string
	}{
		{"GRPC", func(c *Config) { c.Frontend.Address = taken.Addr().String() }, "--port"},
		{"HTTP", func(c *Config) { c.Frontend.HTTPAddress = taken.Addr().String() }, "--http-port"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, filepath.Join(t.TempDir(), "vigil.db"))
			tt.set(&cfg)
			_, err := newTestServer(t, cfg)
			var inUse *AddressInUseError
			require.ErrorAs(t, err, &inUse)
			require.Equal(t, tt.flag, inUse.Flag)
			require.Equal(t, "cannot listen on "+taken.Addr().String()+
				": the address is in use by another process (another vigil, or a temporal dev server?); stop it or choose another with "+tt.flag,
				err.Error())

			// The database was released with the failed start.
			srv, err := newTestServer(t, testConfig(t, cfg.Persistence.SQLite.Path))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, srv.Start(ctx))
			require.NoError(t, srv.Stop(ctx))
		})
	}
}

// TestDatabaseInUseByAnotherServer: a second server on the same SQLite file is refused while
// the first runs, and starts once it stopped.
func TestDatabaseInUseByAnotherServer(t *testing.T) {
	t.Parallel()

	path := filepath.Join(t.TempDir(), "vigil.db")
	first, err := newTestServer(t, testConfig(t, path))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, first.Start(ctx))

	_, err = newTestServer(t, testConfig(t, path))
	var inUse *DatabaseInUseError
	require.ErrorAs(t, err, &inUse)
	require.Contains(t, err.Error(), "the database "+path+" is in use by another vigil process (pid ")

	require.NoError(t, first.Stop(ctx))
	second, err := newTestServer(t, testConfig(t, path))
	require.NoError(t, err)
	require.NoError(t, second.Start(ctx))
	require.NoError(t, second.Stop(ctx))
}
