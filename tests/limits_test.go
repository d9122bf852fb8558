package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// Payloads over limit.blobSize.error are refused the way Temporal refuses them.
func TestPayloadSizeLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	const limit = 64 << 10
	cluster := testcluster.New(t, testcluster.Options{DynamicConfig: map[dynamicconfig.Key]any{
		dynamicconfig.BlobSizeLimitError.Key(): limit,
	}})
	c := dialSDK(t, cluster.Address())

	w := sdkworker.New(c, "limits", sdkworker.Options{})
	w.RegisterActivityWithOptions(func(_ context.Context, size int) (string, error) {
		return strings.Repeat("x", size), nil
	}, activity.RegisterOptions{Name: "echo"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	start := func(id string, input int) (client.ActivityHandle, error) {
		return c.ExecuteActivity(context.Background(), client.StartActivityOptions{
			ID: id, TaskQueue: "limits", StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
		}, "echo", input)
	}

	t.Run("AnOversizeInputIsRefused", func(t *testing.T) {
		_, err := c.ExecuteActivity(context.Background(), client.StartActivityOptions{
			ID: "big-input", TaskQueue: "limits", StartToCloseTimeout: time.Minute,
		}, "echo", strings.Repeat("y", 2*limit))
		var invalid *serviceerror.InvalidArgument
		require.ErrorAs(t, err, &invalid)
		require.Contains(t, err.Error(), "input is")
		require.Contains(t, err.Error(), "limit.blobSize.error")
	})

	t.Run("AnOversizeResultFailsTheActivity", func(t *testing.T) {
		handle, err := start("big-result", 2*limit)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = handle.Get(ctx, nil)
		require.Error(t, err)
		var serverErr *temporal.ServerError
		require.True(t, errors.As(err, &serverErr), "want a ServerError, got %v", err)
		require.Contains(t, serverErr.Error(), "Complete result exceeds size limit.")
	})

	t.Run("AResultWithinTheLimitCompletes", func(t *testing.T) {
		handle, err := start("small-result", limit/2)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out string
		require.NoError(t, handle.Get(ctx, &out))
		require.Len(t, out, limit/2)
	})
}
