package activity_test

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

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/persistence/persistencefx"
	"github.com/vigilhq/vigil/persistence/sqlite"
	"github.com/vigilhq/vigil/tasks"
)

// TestFxAssembly wires the activity and worker modules as the server does and checks, over the
// history RPC, that the Worker component's reschedules now reach the Activity component.
func TestFxAssembly(t *testing.T) {
	dispatcher := &recordingDispatcher{}
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
			func() activity.Dispatcher { return dispatcher },
			func() activity.CommandSender { return &recordingSender{} },
		),
		chasm.Module,
		persistencefx.Module,
		tasks.Module,
		history.Module,
		worker.Module,
		activity.Module,
		fx.Populate(&router),
	)
	app.RequireStart()
	defer app.RequireStop()

	ctx := context.Background()
	conn, err := router.ConnFor(testNamespaceID, "a1")
	require.NoError(t, err)
	activities := activitypb.NewActivityHistoryServiceClient(conn)
	started, err := activities.StartActivity(ctx, startRequest("a1"))
	require.NoError(t, err)
	var ref activity.ActivityTaskRef
	require.Eventually(t, func() bool {
		refs := dispatcher.dispatched()
		if len(refs) == 1 {
			ref = refs[0]
		}
		return len(refs) == 1
	}, 10*time.Second, 5*time.Millisecond)
	_, err = activities.RecordActivityTaskStarted(ctx, &activitypb.RecordActivityTaskStartedRequest{
		NamespaceId: testNamespaceID, ActivityId: "a1", RunId: started.RunId, Stamp: ref.Stamp, WorkerInstanceKey: "w1",
	})
	require.NoError(t, err)

	resp, err := workerpb.NewActivityReschedulerServiceClient(conn).RescheduleActivities(ctx, &workerpb.RescheduleActivitiesRequest{
		NamespaceId: testNamespaceID, WorkerInstanceKey: "w1", Activities: []*workerpb.BoundActivity{entry("a1", started.RunId, 1)},
	})
	require.NoError(t, err)
	require.Equal(t, []workerpb.RescheduleOutcome{rescheduled}, resp.Outcomes)

	// A stale token crosses the wire as NotFound.
	_, err = activities.RecordActivityTaskHeartbeat(ctx, &activitypb.RecordActivityTaskHeartbeatRequest{
		NamespaceId: testNamespaceID, TaskToken: mustToken(t, started.RunId, 1),
	})
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, err, &notFound)
}

func mustToken(t *testing.T, runID string, stamp int64) []byte {
	t.Helper()
	token, err := activity.EncodeTaskToken(&activitypb.TaskToken{
		NamespaceId: testNamespaceID, ActivityId: "a1", RunId: runID, Stamp: stamp, Attempt: 1,
	})
	require.NoError(t, err)
	return token
}
