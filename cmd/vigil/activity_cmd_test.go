package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"gopkg.in/yaml.v3"

	"github.com/vigilhq/vigil/tests/testcluster"
)

func TestActivityCommands(t *testing.T) {
	cluster := testcluster.New(t, testcluster.Options{})
	vigil := func(args ...string) (code int, stdout, stderr string) {
		var out, errOut bytes.Buffer
		code = run(append(args, "--address", cluster.Address()), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	conn, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	wf := workflowservice.NewWorkflowServiceClient(conn)
	for _, id := range []string{"pay-1", "pay-2"} {
		_, err := wf.StartActivityExecution(context.Background(), &workflowservice.StartActivityExecutionRequest{
			Namespace: "default", ActivityId: id, ActivityType: &commonpb.ActivityType{Name: "Charge"},
			TaskQueue: &taskqueuepb.TaskQueue{Name: "payments"}, StartToCloseTimeout: durationpb.New(time.Minute), RequestId: id,
		})
		require.NoError(t, err)
	}

	code, stdout, stderr := vigil("activity", "terminate", "pay-1", "--reason", "duplicate charge")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "pay-1 terminated")

	code, stdout, stderr = vigil("activity", "list")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 3, stdout)
	require.Contains(t, stdout, "Terminated")
	require.Contains(t, stdout, "Running")

	// The same activities as JSON, JSON lines and YAML.
	code, stdout, stderr = vigil("activity", "list", "-o", "json")
	require.Equal(t, 0, code, stderr)
	var listed []struct {
		ActivityID string `json:"activityId" yaml:"activityId"`
		Status     string `json:"status" yaml:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &listed), stdout)
	require.Len(t, listed, 2)
	statuses := map[string]string{}
	for _, a := range listed {
		statuses[a.ActivityID] = a.Status
	}
	require.Equal(t, map[string]string{"pay-1": "ACTIVITY_EXECUTION_STATUS_TERMINATED", "pay-2": "ACTIVITY_EXECUTION_STATUS_RUNNING"}, statuses)
	code, stdout, stderr = vigil("activity", "list", "-o", "jsonl", "--query", `ActivityId = "pay-1"`)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 1, strings.Count(stdout, "\n"), stdout)
	require.Contains(t, stdout, `"activityId":"pay-1"`)
	code, stdout, stderr = vigil("activity", "list", "-o", "yaml")
	require.Equal(t, 0, code, stderr)
	listed = nil
	require.NoError(t, yaml.Unmarshal([]byte(stdout), &listed), stdout)
	require.Len(t, listed, 2)
	code, stdout, _ = vigil("activity", "list", "--no-header")
	require.Equal(t, 0, code)
	require.Len(t, strings.Split(strings.TrimSpace(stdout), "\n"), 2, stdout)

	code, stdout, stderr = vigil("activity", "list", "--query", `ExecutionStatus = "Running"`)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "pay-2")
	require.NotContains(t, stdout, "pay-1")

	code, _, stderr = vigil("activity", "list", "--query", `Nope = "x"`)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `unknown column "Nope"`)

	code, stdout, stderr = vigil("activity", "describe", "pay-2")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `Activity ID\s+pay-2`, stdout)
	require.Regexp(t, `Type\s+Charge`, stdout)
	require.Regexp(t, `Task queue\s+payments`, stdout)
	require.Regexp(t, `Status\s+Running`, stdout)
	require.Regexp(t, `Run state\s+Scheduled`, stdout)
	require.Regexp(t, `Start-to-close\s+1m0s`, stdout)
	code, stdout, stderr = vigil("activity", "describe", "pay-2", "--output", "json")
	require.Equal(t, 0, code, stderr)
	var described struct {
		Info struct {
			ActivityID string `json:"activityId"`
			RunState   string `json:"runState"`
		} `json:"info"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &described), stdout)
	require.Equal(t, "pay-2", described.Info.ActivityID)
	require.Equal(t, "PENDING_ACTIVITY_STATE_SCHEDULED", described.Info.RunState)
	code, stdout, stderr = vigil("activity", "describe", "-o", "jsonl", "pay-2")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 1, strings.Count(stdout, "\n"), stdout)
	require.NoError(t, json.Unmarshal([]byte(stdout), &described), stdout)
	require.Equal(t, "pay-2", described.Info.ActivityID)
	code, stdout, stderr = vigil("activity", "describe", "pay-2", "-o", "yaml")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^info:\n  activityId: pay-2\n`, stdout)

	// Cancel: a waiting activity is canceled at once.
	code, stdout, stderr = vigil("activity", "cancel", "pay-2", "--reason", "not needed")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "cancellation of activity pay-2 requested")
	code, stdout, stderr = vigil("activity", "describe", "pay-2")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `Status\s+Canceled`, stdout)
	require.Regexp(t, `Canceled reason\s+not needed`, stdout)

	code, _, stderr = vigil("activity", "describe", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "not found")
	code, _, _ = vigil("activity", "cancel")
	require.Equal(t, 2, code)
	code, _, stderr = vigil("activity", "terminate", "a", "b")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unexpected argument "b"`)
}
