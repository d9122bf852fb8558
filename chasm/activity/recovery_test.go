package activity_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/chasm/activity"
)

func TestRequeueDispatchedAfterRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("queued")         // dispatched to matching, then the server restarts
	b.startAndPoll("running") // started: not matching's business any more
	_, err := b.handler.StartActivity(b.ctx, startRequest("not-yet-dispatched"))
	require.NoError(t, err) // its DispatchTask is still pending and will dispatch it

	rec := &recordingDispatcher{}
	var n int
	n, err = activity.RequeueDispatched(context.Background(), b.engine, b.engine.Registry(), []string{testNamespaceID}, rec)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, rec.dispatched(), 1)
	require.Equal(t, "queued", rec.dispatched()[0].ActivityID)
}
