package chasm

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
)

// TestErrorsSpeakOfComponents: a caller told NotFound or AlreadyExists reads about its worker or
// activity, not about an internal archetype and namespace ID.
func TestErrorsSpeakOfComponents(t *testing.T) {
	t.Parallel()

	worker := NewComponentRef("worker.worker", ExecutionKey{NamespaceID: "3f1c9a2e-uuid", BusinessID: "host-1:pid-42"})
	err := NewExecutionNotFoundError(worker)
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, err, &notFound)
	require.Equal(t, `worker "host-1:pid-42" not found`, err.Error())

	activity := NewComponentRef("activity.activity", ExecutionKey{NamespaceID: "3f1c9a2e-uuid", BusinessID: "charge-card", RunID: "r-7"})
	require.Equal(t, `activity "charge-card" (run r-7) not found`, NewExecutionNotFoundError(activity).Error())

	started := &ExecutionAlreadyStartedError{Ref: activity, CurrentRunID: "r-7"}
	require.Equal(t, `activity "charge-card" already started (run r-7)`, started.Error())
	var exists *serviceerror.AlreadyExists
	require.True(t, errors.As(started.Unwrap(), &exists))

	for _, msg := range []string{err.Error(), started.Error()} {
		require.NotContains(t, msg, "uuid")
		require.NotContains(t, msg, "worker.worker")
		require.NotContains(t, msg, "activity.activity")
	}
}
