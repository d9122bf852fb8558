package query

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
)

func testWorker() *Worker {
	return &Worker{
		WorkerInstanceKey: "wik-1",
		WorkerIdentity:    "1234@host-a@",
		HostName:          "host-a",
		TaskQueue:         "orders",
		DeploymentName:    "shop",
		BuildID:           "v42",
		SdkName:           "temporal-go",
		SdkVersion:        "1.50.0",
		Status:            enumspb.WORKER_STATUS_RUNNING,
		StartTime:         time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC),
		HeartbeatTime:     time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC),
	}
}

func TestMatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{``, true},
		{`   `, true},
		{`TaskQueue = "orders"`, true},
		{`TaskQueue = 'orders'`, true},
		{`taskqueue = 'orders'`, true},
		{"`TaskQueue` = 'orders'", true},
		{`TASKQUEUE != 'orders'`, false},
		{`TaskQueue <> 'orders'`, false},
		{`WorkerInstanceKey = "wik-1"`, true},
		{`WorkerIdentity STARTS_WITH "1234@"`, true},
		{`WorkerIdentity starts_with "9"`, false},
		{`HostName NOT STARTS_WITH "host-b"`, true},
		{`HostName IN ("host-b", "host-a")`, true},
		{`HostName NOT IN ("host-a")`, false},
		{`DeploymentName = "shop" AND BuildId = "v42"`, true},
		{`SdkName = "temporal-go" AND SdkVersion = "1.50.0"`, true},
		{`Status = "Running"`, true},
		{`Status = "RUNNING"`, true},
		{`Status = "running"`, true},
		{`Status = "WORKER_STATUS_RUNNING"`, true},
		{`WorkerStatus = "Running"`, true},
		{`Status = "ShuttingDown"`, false},
		{`Status != "Shutdown"`, true},
		{`Status IN ("SHUTTING_DOWN", "Running")`, true},
		{`Status NOT IN ("Running")`, false},
		{`HeartbeatTime > "2025-01-01T11:59:59Z"`, true},
		{`HeartbeatTime < "2025-01-01T12:00:00Z"`, false},
		{`HeartbeatTime <= "2025-01-01T12:00:00Z"`, true},
		{`HeartbeatTime >= "2025-01-01T13:00:00+01:00"`, true},
		{`HeartbeatTime = "2025-01-01T14:00:00+02:00"`, true},
		{`StartTime BETWEEN "2025-01-01T00:00:00Z" AND "2025-01-01T10:00:00Z"`, true},
		{`StartTime NOT BETWEEN "2025-01-01T00:00:00Z" AND "2025-01-01T10:00:00Z"`, false},
		{`StartTime IS NOT NULL`, true},
		{`BuildId IS NULL`, false},
		{`TaskQueue = "x" OR TaskQueue = "orders"`, true},
		{`TaskQueue = "x" OR TaskQueue = "y" AND Status = "Running"`, false},
		{`(TaskQueue = "x" OR TaskQueue = "orders") AND Status = "Running"`, true},
		{`((TaskQueue = "orders")) AND (HostName = "host-a" OR HostName = "host-b")`, true},
		{`TaskQueue = 'it''s'`, false},
		{`WorkerIdentity = '1234@host-a@' and hostname = "host-a" or status = "shutdown"`, true},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, err := Parse(tc.query)
			require.NoError(t, err)
			require.Equal(t, tc.want, q.Matches(testWorker()))
			// The canonical form means the same thing.
			again, err := Parse(q.String())
			require.NoError(t, err, q.String())
			require.Equal(t, tc.want, again.Matches(testWorker()), q.String())
			require.Equal(t, q.String(), again.String())
		})
	}
}

func TestUnknownTimesMatchNothingButIsNull(t *testing.T) {
	t.Parallel()
	w := testWorker()
	w.StartTime = time.Time{}
	for query, want := range map[string]bool{
		`StartTime > "2000-01-01T00:00:00Z"`:  false,
		`StartTime != "2000-01-01T00:00:00Z"`: false,
		`StartTime IS NULL`:                   true,
	} {
		q, err := Parse(query)
		require.NoError(t, err)
		require.Equal(t, want, q.Matches(w), query)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query   string
		pos     int // 1-based, as printed
		message string
	}{
		{`Colour = "red"`, 1, `unknown column "Colour"`},
		{`TaskQueue = "a" AND Nope = "b"`, 21, `unknown column "Nope"`},
		{`TaskQueue = orders`, 13, `expected a quoted string value for TaskQueue, found "orders"`},
		{`TaskQueue = "orders`, 13, `unterminated string`},
		{`TaskQueue = "a" AND`, 20, `expected a column name or '(', found end of query`},
		{`(TaskQueue = "a"`, 17, `expected ')' to close '(' at position 1`},
		{`TaskQueue = "a")`, 16, `unbalanced ')'`},
		{`TaskQueue = "a" TaskQueue = "b"`, 17, `expected AND, OR or end of query`},
		{`TaskQueue > "a"`, 11, `operator > is not supported for TaskQueue`},
		{`Status = "Sleeping"`, 10, `unknown Status "Sleeping"`},
		{`Status STARTS_WITH "Run"`, 8, `STARTS_WITH is not supported for Status`},
		{`StartTime > "yesterday"`, 13, `not an RFC3339 time`},
		{`HostName BETWEEN "a" AND "b"`, 10, `BETWEEN is only supported`},
		{`HostName ~ "a"`, 10, `unexpected character '~'`},
		{`HostName ! "a"`, 10, `did you mean '!='`},
		{`AND = "a"`, 1, `found keyword AND`},
		{`HostName`, 9, `expected an operator after HostName`},
		{`HostName IS "x"`, 13, `expected NULL after IS`},
		{`HostName NOT = "x"`, 14, `expected STARTS_WITH, IN or BETWEEN after NOT`},
		{`HostName IN "x"`, 13, `expected '(' after IN`},
		{`HostName IN ("x" "y")`, 18, `expected ',' or ')' in IN list`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			_, err := Parse(tc.query)
			var qerr *Error
			require.ErrorAs(t, err, &qerr)
			require.Equal(t, tc.pos, qerr.Pos+1, err.Error())
			require.Contains(t, err.Error(), tc.message)
		})
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	deep := ""
	for range MaxDepth + 1 {
		deep += "("
	}
	_, err := Parse(deep + `TaskQueue = "a"`)
	require.ErrorContains(t, err, "nested deeper")

	long := make([]byte, MaxLength+1)
	for i := range long {
		long[i] = ' '
	}
	_, err = Parse(string(long))
	require.ErrorContains(t, err, "longer than")
}

func TestParseStatus(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]enumspb.WorkerStatus{
		"Running": enumspb.WORKER_STATUS_RUNNING, "RUNNING": enumspb.WORKER_STATUS_RUNNING,
		"worker_status_running": enumspb.WORKER_STATUS_RUNNING,
		"ShuttingDown":          enumspb.WORKER_STATUS_SHUTTING_DOWN, "SHUTTING_DOWN": enumspb.WORKER_STATUS_SHUTTING_DOWN,
		"Shutdown": enumspb.WORKER_STATUS_SHUTDOWN, "WORKER_STATUS_SHUTDOWN": enumspb.WORKER_STATUS_SHUTDOWN,
	} {
		got, ok := ParseStatus(in)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "UNSPECIFIED", "WORKER_STATUS_UNSPECIFIED", "dead"} {
		_, ok := ParseStatus(in)
		require.False(t, ok, in)
	}
}
