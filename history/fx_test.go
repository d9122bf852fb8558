package history_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm"
	testpb "github.com/vigilhq/vigil/chasm/chasmtest/gen/testpb/v1"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/persistence/persistencefx"
	"github.com/vigilhq/vigil/persistence/sqlite"
	"github.com/vigilhq/vigil/tasks"
)

// TestFxAssembly plugs the reminder library and its gRPC service into a history host purely
// through fx modules, and drives it through the shard router.
func TestFxAssembly(t *testing.T) {
	sink := reminder.NewRecordingSink()
	var router *history.Router
	app := fxtest.New(t,
		fx.Supply(
			history.Config{NumShards: 4},
			history.ServerConfig{},
			persistencefx.Config{SQLite: sqlite.Config{Path: filepath.Join(t.TempDir(), "vigil.db")}},
		),
		fx.Provide(
			func() clock.TimeSource { return clock.NewRealTimeSource() },
			func() *zap.Logger { return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)) },
			func() tally.Scope { return tally.NewTestScope("", nil) },
			func(l *zap.Logger) *dynamicconfig.Collection {
				return dynamicconfig.NewCollection(dynamicconfig.NewMemoryClient(), l)
			},
			chasm.AsLibrary(func() *reminder.Library { return reminder.NewLibrary(sink) }),
			history.AsService(func(e chasm.Engine) history.ServiceRegistration {
				return func(s grpc.ServiceRegistrar) { testpb.RegisterReminderServiceServer(s, reminder.NewHandler(e)) }
			}),
		),
		chasm.Module,
		persistencefx.Module,
		tasks.Module,
		history.Module,
		fx.Populate(&router),
	)
	app.RequireStart()
	defer app.RequireStop()

	conn, err := router.ConnFor("ns", "r1")
	require.NoError(t, err)
	client := testpb.NewReminderServiceClient(conn)
	ctx := context.Background()
	_, err = client.Schedule(ctx, &testpb.ScheduleRequest{
		NamespaceId: "ns", ReminderId: "r1", Destination: "inbox", Delay: durationpb.New(10 * time.Millisecond),
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		resp, err := client.Describe(ctx, &testpb.DescribeRequest{NamespaceId: "ns", ReminderId: "r1"})
		require.NoError(t, err)
		return resp.GetState().GetStatus() == testpb.ReminderStatus_REMINDER_STATUS_NOTIFIED
	}, 10*time.Second, 10*time.Millisecond)
	require.Len(t, sink.Delivered(), 1)

	// A bad request crosses the wire with its code.
	_, err = client.Schedule(ctx, &testpb.ScheduleRequest{NamespaceId: "ns"})
	var invalid *serviceerror.InvalidArgument
	require.ErrorAs(t, err, &invalid)
	require.Contains(t, invalid.Message, "reminder_id")
}
