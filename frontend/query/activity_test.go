package query

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
)

func TestActivityQueries(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	running := &Activity{ActivityID: "pay-1", RunID: "r1", ActivityType: "Charge", TaskQueue: "payments",
		WorkerInstanceKey: "w-1", Status: enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING, StartTime: start, ExecutionTime: start}
	terminated := &Activity{ActivityID: "pay-2", RunID: "r2", ActivityType: "Refund", TaskQueue: "payments",
		Status: enumspb.ACTIVITY_EXECUTION_STATUS_TERMINATED, StartTime: start, ExecutionTime: start.Add(time.Hour),
		CloseTime: start.Add(time.Minute)}
	for _, tc := range []struct {
		query string
		want  []*Activity
	}{
		{``, []*Activity{running, terminated}},
		{`ActivityType = "Charge"`, []*Activity{running}},
		{`TaskQueue = 'payments' AND ExecutionStatus = "Terminated"`, []*Activity{terminated}},
		{`Status IN ("RUNNING", "ACTIVITY_EXECUTION_STATUS_TIMED_OUT")`, []*Activity{running}},
		{`ActivityId STARTS_WITH "pay-" AND CloseTime IS NULL`, []*Activity{running}},
		{`WorkerInstanceKey = "w-1"`, []*Activity{running}},
		{`CloseTime > "2026-01-02T03:04:30Z"`, []*Activity{terminated}},
		{`ExecutionDuration = "1m"`, []*Activity{terminated}},
		{`ExecutionDuration > 59000000000`, []*Activity{terminated}},
		{`ExecutionDuration < "1h" ORDER BY ExecutionDuration DESC`, []*Activity{terminated}},
		{`ExecutionDuration IS NULL`, []*Activity{running}},
		{`ExecutionDuration BETWEEN "30s" AND "2m"`, []*Activity{terminated}},
		{`ExecutionTime = "2026-01-02T03:04:05Z"`, []*Activity{running}},
		{`ExecutionTime > "2026-01-02T03:04:05Z"`, []*Activity{terminated}},
	} {
		q, err := ParseActivities(tc.query)
		require.NoError(t, err, tc.query)
		var got []*Activity
		for _, a := range []*Activity{running, terminated} {
			if q.MatchesActivity(a) {
				got = append(got, a)
			}
		}
		require.Equal(t, tc.want, got, tc.query)
		// Canonical form parses to the same query.
		again, err := ParseActivities(q.String())
		require.NoError(t, err, q.String())
		require.Equal(t, q.String(), again.String())
	}

	for query, msg := range map[string]string{
		`HeartbeatTime > "2026-01-01T00:00:00Z"`: `unknown column "HeartbeatTime"`,
		`ExecutionStatus = "Paused"`:             `use Running, Completed, Failed, Canceled, Terminated or TimedOut`,
		`ActivityType BETWEEN "a" AND "b"`:       `only supported for times (StartTime, CloseTime, ExecutionTime) and numbers`,
		`ExecutionDuration > "soon"`:             `not a duration`,
	} {
		_, err := ParseActivities(query)
		require.ErrorContains(t, err, msg, query)
	}
	// A worker query does not match activities, nor the reverse.
	wq, err := Parse(`TaskQueue = "payments"`)
	require.NoError(t, err)
	require.False(t, wq.MatchesActivity(running))
}
