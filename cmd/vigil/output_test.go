package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gopkg.in/yaml.v3"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

func testWorkers() []*livenesspb.WorkerLiveness {
	return []*livenesspb.WorkerLiveness{
		{WorkerInstanceKey: "w-1", State: livenesspb.LivenessState_LIVENESS_STATE_ACTIVE, ConflictToken: 7,
			LeaseDeadline: timestamppb.New(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))},
		{WorkerInstanceKey: "w-2", State: livenesspb.LivenessState_LIVENESS_STATE_INACTIVE},
	}
}

func printWorkers(t *testing.T, format string, noHeader bool, workers []*livenesspb.WorkerLiveness) string {
	t.Helper()
	var out bytes.Buffer
	p := &printer{format: format, noHeader: noHeader, w: &out}
	require.NoError(t, list(p, workers, []string{"KEY", "STATE"}, func(w *livenesspb.WorkerLiveness) []string {
		return []string{w.GetWorkerInstanceKey(), stateName(w.GetState())}
	}))
	return out.String()
}

// TestPrinterList: a list in each format holds the same objects.
func TestPrinterList(t *testing.T) {
	require.Equal(t, "KEY  STATE\nw-1  ACTIVE\nw-2  INACTIVE\n", printWorkers(t, formatTable, false, testWorkers()))
	require.Equal(t, "w-1  ACTIVE\nw-2  INACTIVE\n", printWorkers(t, formatTable, true, testWorkers()))

	out := printWorkers(t, formatJSON, false, testWorkers())
	require.Equal(t, `[
  {
    "workerInstanceKey": "w-1",
    "state": "LIVENESS_STATE_ACTIVE",
    "leaseDeadline": "2026-01-01T00:01:00Z",
    "conflictToken": "7"
  },
  {
    "workerInstanceKey": "w-2",
    "state": "LIVENESS_STATE_INACTIVE"
  }
]
`, out, "protojson's names, enums by name, RFC 3339, int64 as a string, stable indentation")

	out = printWorkers(t, formatJSONL, false, testWorkers())
	require.Equal(t, `{"workerInstanceKey":"w-1","state":"LIVENESS_STATE_ACTIVE","leaseDeadline":"2026-01-01T00:01:00Z","conflictToken":"7"}
{"workerInstanceKey":"w-2","state":"LIVENESS_STATE_INACTIVE"}
`, out)

	out = printWorkers(t, formatYAML, false, testWorkers())
	require.Equal(t, `- workerInstanceKey: w-1
  state: LIVENESS_STATE_ACTIVE
  leaseDeadline: "2026-01-01T00:01:00Z"
  conflictToken: "7"
- workerInstanceKey: w-2
  state: LIVENESS_STATE_INACTIVE
`, out, "block style, keys in protojson's order, a number-like string quoted")
	var back []map[string]string
	require.NoError(t, yaml.Unmarshal([]byte(out), &back))
	require.Equal(t, "7", back[0]["conflictToken"])

	// Empty lists are still documents.
	require.Equal(t, "KEY  STATE\n", printWorkers(t, formatTable, false, nil))
	require.Equal(t, "[]\n", printWorkers(t, formatJSON, false, nil))
	require.Equal(t, "", printWorkers(t, formatJSONL, false, nil))
	require.Equal(t, "[]\n", printWorkers(t, formatYAML, false, nil))
}

// TestWorkerDescribeIsOneDocument: worker describe --moved-activities prints the worker and
// the activities its loss moved as one document in every machine format, and as the record
// followed by a table of them in a table.
func TestWorkerDescribeIsOneDocument(t *testing.T) {
	moved := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	resp := &livenesspb.DescribeWorkerLivenessResponse{
		Worker: &livenesspb.WorkerLiveness{WorkerInstanceKey: "w-1", State: livenesspb.LivenessState_LIVENESS_STATE_INACTIVE,
			InactiveReason: livenesspb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST, InactiveTime: timestamppb.New(moved)},
		MovedActivities: []*livenesspb.MovedActivity{
			{ActivityId: "a-1", RunId: "r-1", MovedTime: timestamppb.New(moved), Reason: "worker_inactive",
				Status: "Running", RunState: "Started", Attempt: 2, WorkerInstanceKey: "w-2", WorkerIdentity: "2@b"},
			{ActivityId: "a-2", RunId: "r-2", MovedTime: timestamppb.New(moved), Reason: "orphaned", Status: "Completed", Attempt: 1},
		},
	}
	print := func(format string) string {
		var out bytes.Buffer
		p := &printer{format: format, w: &out}
		require.NoError(t, p.object(resp, func(io.Writer) error { return describeWorkerTable(p, resp, true, moved.Add(time.Minute)) }))
		return out.String()
	}

	var doc struct {
		Worker struct {
			WorkerInstanceKey string `json:"workerInstanceKey"`
			InactiveReason    string `json:"inactiveReason"`
		} `json:"worker"`
		MovedActivities []struct {
			ActivityID string `json:"activityId"`
			Attempt    int    `json:"attempt"`
		} `json:"movedActivities"`
	}
	require.NoError(t, json.Unmarshal([]byte(print(formatJSON)), &doc))
	require.Equal(t, "w-1", doc.Worker.WorkerInstanceKey)
	require.Equal(t, "INACTIVE_REASON_CONNECTION_LOST", doc.Worker.InactiveReason)
	require.Len(t, doc.MovedActivities, 2)
	require.Equal(t, 2, doc.MovedActivities[0].Attempt)

	jsonl := print(formatJSONL)
	require.Equal(t, 1, strings.Count(jsonl, "\n"), "one line: %s", jsonl)
	require.NoError(t, json.Unmarshal([]byte(jsonl), &doc))

	var y map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(print(formatYAML)), &y))
	require.Len(t, y["movedActivities"], 2)

	table := print(formatTable)
	require.Regexp(t, `Worker instance key\s+w-1\n`, table)
	require.Regexp(t, `State\s+INACTIVE\n`, table)
	require.Regexp(t, `Lease\s+connection_lost 1m0s ago\n`, table)
	require.Regexp(t, `Inactive reason\s+CONNECTION_LOST\n`, table)
	require.Contains(t, table, "Activities this worker's loss moved: 2")
	require.Regexp(t, `a-1\s+r-1\s+2025-01-01T00:00:00Z\s+worker_inactive\s+Running \(Started\)\s+2\s+w-2 2@b`, table)
	require.Regexp(t, `a-2\s+r-2\s+\S+\s+orphaned\s+Completed\s+1\s+-`, table)

	resp.MovedActivities = nil
	require.Contains(t, print(formatTable), "moved: 0")
}

// TestWatchEventFormats: worker watch prints a line of text per event, one JSON object per
// line with json and jsonl, and one YAML document per event with yaml.
func TestWatchEventFormats(t *testing.T) {
	ev := &livenesspb.WorkerEvent{Type: livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT_END, Cursor: "c-1",
		Time: timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	print := func(format string) string {
		var out bytes.Buffer
		require.NoError(t, printEvent(&printer{format: format, w: &out}, ev))
		require.NoError(t, printEvent(&printer{format: format, w: &out}, ev))
		return out.String()
	}
	require.Regexp(t, `^\d\d:\d\d:\d\d\.000  SNAPSHOT_END\s+\(live from here\)\n\d`, print(formatTable))
	line := `{"type":"WORKER_EVENT_TYPE_SNAPSHOT_END","cursor":"c-1","time":"2026-01-01T00:00:00Z"}` + "\n"
	require.Equal(t, line+line, print(formatJSON))
	require.Equal(t, line+line, print(formatJSONL))
	doc := "---\ntype: WORKER_EVENT_TYPE_SNAPSHOT_END\ncursor: c-1\ntime: \"2026-01-01T00:00:00Z\"\n"
	require.Equal(t, doc+doc, print(formatYAML))
}
