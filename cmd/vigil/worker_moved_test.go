package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

func TestPrintMovedActivities(t *testing.T) {
	var out bytes.Buffer
	printMovedActivities(&out, []*livenesspb.MovedActivity{
		{ActivityId: "a-1", RunId: "r-1", MovedTime: timestamppb.New(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)), Reason: "worker_inactive",
			Status: "Running", RunState: "Started", Attempt: 2, WorkerInstanceKey: "w-2", WorkerIdentity: "2@b"},
		{ActivityId: "a-2", RunId: "r-2", MovedTime: timestamppb.New(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)), Reason: "orphaned",
			Status: "Completed", Attempt: 1},
	})
	require.Contains(t, out.String(), "Activities this worker's loss moved: 2")
	require.Regexp(t, `a-1\s+r-1\s+2025-01-01T00:00:00Z\s+worker_inactive\s+Running \(Started\)\s+2\s+w-2 2@b`, out.String())
	require.Regexp(t, `a-2\s+r-2\s+\S+\s+orphaned\s+Completed\s+1\s+-`, out.String())

	out.Reset()
	printMovedActivities(&out, nil)
	require.Contains(t, out.String(), "moved: 0")
}
