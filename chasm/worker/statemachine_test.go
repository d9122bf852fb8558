package worker_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// TestTransitionTable pins down, for every transition, exactly the states it may start from.
func TestTransitionTable(t *testing.T) {
	t.Parallel()
	const (
		unspecified = workerpb.WorkerStatus_WORKER_STATUS_UNSPECIFIED
		active      = workerpb.WorkerStatus_WORKER_STATUS_ACTIVE
		inactive    = workerpb.WorkerStatus_WORKER_STATUS_INACTIVE
		cleanedUp   = workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP
	)
	all := []workerpb.WorkerStatus{unspecified, active, inactive, cleanedUp}
	possible := func(from workerpb.WorkerStatus, check func(*worker.Worker) bool) bool {
		return check(&worker.Worker{WorkerState: &workerpb.WorkerState{Status: from}})
	}
	cases := []struct {
		name  string
		check func(*worker.Worker) bool
		from  []workerpb.WorkerStatus
		to    workerpb.WorkerStatus
		dest  workerpb.WorkerStatus
	}{
		{"Registered", worker.TransitionRegistered.Possible, []workerpb.WorkerStatus{unspecified}, active, worker.TransitionRegistered.Destination},
		{"HeartbeatReceived", worker.TransitionHeartbeatReceived.Possible, []workerpb.WorkerStatus{active}, active, worker.TransitionHeartbeatReceived.Destination},
		{"Resurrected", worker.TransitionResurrected.Possible, []workerpb.WorkerStatus{inactive}, active, worker.TransitionResurrected.Destination},
		{"LeaseExpired", worker.TransitionLeaseExpired.Possible, []workerpb.WorkerStatus{active}, inactive, worker.TransitionLeaseExpired.Destination},
		{"Shutdown", worker.TransitionShutdown.Possible, []workerpb.WorkerStatus{unspecified, active}, inactive, worker.TransitionShutdown.Destination},
		{"CleanedUp", worker.TransitionCleanedUp.Possible, []workerpb.WorkerStatus{inactive}, cleanedUp, worker.TransitionCleanedUp.Destination},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.to, tc.dest)
			for _, from := range all {
				want := false
				for _, f := range tc.from {
					want = want || f == from
				}
				require.Equal(t, want, possible(from, tc.check), "from %s", from)
			}
		})
	}
	// CLEANED_UP is terminal: no transition leaves it.
	for _, tc := range cases {
		require.False(t, possible(cleanedUp, tc.check), tc.name)
	}
}
