package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/history"
	matchingpb "github.com/vigilhq/vigil/matching/gen/matchingpb/v1"
)

// TestMatchingServedOnHistoryServer: a single host is the one member of its cluster, with its
// history server's address, and serves MatchingService there, so that other hosts can reach
// the queues it owns.
func TestMatchingServedOnHistoryServer(t *testing.T) {
	var cfg Config
	cfg.Frontend.Address = "127.0.0.1:0"
	cfg.Frontend.HTTPAddress = "127.0.0.1:0"
	cfg.History.NumShards = 4
	cfg.Persistence.SQLite.Path = filepath.Join(t.TempDir(), "vigil.db")
	var (
		lm      *history.LocalMembership
		monitor membership.Monitor
	)
	srv, err := New(cfg,
		WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))),
		WithDynamicConfigClient(dynamicconfig.NewMemoryClient()),
		WithFxOptions(fx.Populate(&lm, &monitor)))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, srv.Start(ctx))
	defer func() { require.NoError(t, srv.Stop(ctx)) }()

	require.Equal(t, []membership.Host{monitor.Self()}, monitor.Members())
	require.Equal(t, lm.Address(), monitor.Self().HistoryAddress)

	conn, err := grpc.NewClient(lm.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := matchingpb.NewMatchingServiceClient(conn)
	task := &matchingpb.ActivityTaskRef{NamespaceId: "ns", TaskQueue: "tq", ActivityId: "act-1", RunId: "run-1", Stamp: 1}
	added, err := client.AddActivityTask(ctx, &matchingpb.AddActivityTaskRequest{Task: task})
	require.NoError(t, err)
	require.False(t, added.GetNotOwner())
	polled, err := client.PollActivityTask(ctx, &matchingpb.PollActivityTaskRequest{NamespaceId: "ns", TaskQueue: "tq"})
	require.NoError(t, err)
	require.Equal(t, "act-1", polled.GetTask().GetActivityId())
}
