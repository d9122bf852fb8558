package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"gopkg.in/yaml.v3"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// workerFixture is a server with two workers: cli-w-1 ACTIVE on task queue orders, cli-w-2
// INACTIVE (shut down), and one standalone activity, pay-9.
func workerFixture(t *testing.T) string {
	t.Helper()
	cluster := testcluster.New(t, testcluster.Options{})
	conn, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ctx := context.Background()
	live := livenesspb.NewWorkerLivenessServiceClient(conn)
	wf := workflowservice.NewWorkflowServiceClient(conn)
	for _, w := range []struct{ key, queue, identity string }{{"cli-w-1", "orders", "1@host-a"}, {"cli-w-2", "payments", "2@host-b"}} {
		_, err := live.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{Namespace: "default", LeaseDuration: durationpb.New(10 * time.Minute),
			WorkerHeartbeat: &workerv1.WorkerHeartbeat{WorkerInstanceKey: w.key, TaskQueue: w.queue, WorkerIdentity: w.identity}})
		require.NoError(t, err)
	}
	_, err = wf.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: "default", WorkerInstanceKey: "cli-w-2"})
	require.NoError(t, err)
	_, err = wf.StartActivityExecution(ctx, &workflowservice.StartActivityExecutionRequest{
		Namespace: "default", ActivityId: "pay-9", ActivityType: &commonpb.ActivityType{Name: "Charge"},
		TaskQueue: &taskqueuepb.TaskQueue{Name: "payments"}, StartToCloseTimeout: durationpb.New(time.Minute), RequestId: "pay-9",
	})
	require.NoError(t, err)
	return cluster.Address()
}

// nonEmptyLines splits output into its non-empty lines.
func nonEmptyLines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestWorkerCommandsInEveryFormat: worker list and worker describe print the same records as a
// table, JSON, JSON lines and YAML; the connection flags go anywhere.
func TestWorkerCommandsInEveryFormat(t *testing.T) {
	addr := workerFixture(t)

	// worker list
	code, out, stderr := vigilRun("worker", "list", "--address", addr)
	require.Equal(t, 0, code, stderr)
	require.Len(t, nonEmptyLines(out), 3, out)
	require.Regexp(t, `^WORKER INSTANCE KEY\s+STATE\s+TASK QUEUE`, out)
	require.Regexp(t, `cli-w-1\s+ACTIVE\s+orders\s+\S*\s*1@host-a\s+expires in`, out)
	require.Regexp(t, `cli-w-2\s+INACTIVE\s+payments`, out)
	_, out, _ = vigilRun("worker", "list", "--address", addr, "--no-header")
	require.Len(t, nonEmptyLines(out), 2, out)
	require.True(t, strings.HasPrefix(out, "cli-w-"), out)

	code, out, stderr = vigilRun("worker", "list", "--address", addr, "-o", "json")
	require.Equal(t, 0, code, stderr)
	var listed []struct {
		WorkerInstanceKey string `json:"workerInstanceKey"`
		State             string `json:"state"`
		LastHeartbeat     struct {
			TaskQueue string `json:"taskQueue"`
		} `json:"lastHeartbeat"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Len(t, listed, 2)
	byKey := map[string]string{}
	for _, w := range listed {
		byKey[w.WorkerInstanceKey] = w.State + " " + w.LastHeartbeat.TaskQueue
	}
	require.Equal(t, map[string]string{"cli-w-1": "LIVENESS_STATE_ACTIVE orders", "cli-w-2": "LIVENESS_STATE_INACTIVE payments"}, byKey)

	code, out, stderr = vigilRun("worker", "list", "--address", addr, "-o", "jsonl")
	require.Equal(t, 0, code, stderr)
	require.Len(t, nonEmptyLines(out), 2, out)
	for _, l := range nonEmptyLines(out) {
		var w map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &w), l)
		require.Contains(t, []string{"cli-w-1", "cli-w-2"}, w["workerInstanceKey"])
	}

	code, out, stderr = vigilRun("worker", "list", "--address", addr, "-o", "yaml")
	require.Equal(t, 0, code, stderr)
	var ylisted []map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &ylisted), out)
	require.Len(t, ylisted, 2)

	// Flags before, between and after the words, --state filtering.
	for _, args := range [][]string{
		{"worker", "--address", addr, "list", "--state", "inactive", "-o", "jsonl"},
		{"worker", "list", "-o", "jsonl", "--state=inactive", "--address=" + addr},
		{"-o", "jsonl", "worker", "--state", "inactive", "list", "--address", addr},
	} {
		code, out, stderr = vigilRun(args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		require.Len(t, nonEmptyLines(out), 1, "%v: %s", args, out)
		require.Contains(t, out, `"workerInstanceKey":"cli-w-2"`, "%v", args)
	}

	// worker describe
	code, out, stderr = vigilRun("worker", "describe", "cli-w-1", "--address", addr)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `Worker instance key\s+cli-w-1\n`, out)
	require.Regexp(t, `State\s+ACTIVE\n`, out)
	require.Regexp(t, `Lease\s+expires in`, out)
	require.Regexp(t, `Task queue\s+orders\n`, out)
	require.Regexp(t, `Identity\s+1@host-a\n`, out)
	code, out, stderr = vigilRun("worker", "--address", addr, "describe", "--moved-activities", "cli-w-2", "--bound-activities")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `State\s+INACTIVE\n`, out)
	require.Regexp(t, `Inactive reason\s+SHUTDOWN\n`, out)
	require.Contains(t, out, "Activities this worker's loss moved: 0")

	for _, format := range []string{"json", "jsonl", "yaml"} {
		code, out, stderr = vigilRun("worker", "describe", "cli-w-2", "--moved-activities", "--address", addr, "-o", format)
		require.Equal(t, 0, code, "%s: %s", format, stderr)
		var doc struct {
			Worker struct {
				WorkerInstanceKey string `json:"workerInstanceKey" yaml:"workerInstanceKey"`
				State             string `json:"state" yaml:"state"`
				InactiveReason    string `json:"inactiveReason" yaml:"inactiveReason"`
			} `json:"worker" yaml:"worker"`
		}
		if format == "yaml" {
			require.NoError(t, yaml.Unmarshal([]byte(out), &doc), out)
		} else {
			require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		}
		require.Equal(t, "cli-w-2", doc.Worker.WorkerInstanceKey, format)
		require.Equal(t, "LIVENESS_STATE_INACTIVE", doc.Worker.State, format)
		require.Equal(t, "INACTIVE_REASON_SHUTDOWN", doc.Worker.InactiveReason, format)
		if format == "jsonl" {
			require.Len(t, nonEmptyLines(out), 1, out)
		}
	}

	code, out, stderr = vigilRun("worker", "describe", "nope", "--address", addr)
	require.Equal(t, exitFailure, code)
	require.Empty(t, out)
	require.Regexp(t, `^vigil: NotFound: .*\n$`, stderr)
}

// TestCompletionFromTheServer: worker keys and activity IDs complete from the server the
// command line points at.
func TestCompletionFromTheServer(t *testing.T) {
	addr := workerFixture(t)
	code, out, stderr := vigilRun("__complete", "worker", "describe", "--address", addr, "cli-")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "cli-w-1\tACTIVE orders 1@host-a\n")
	require.Contains(t, out, "cli-w-2\tINACTIVE payments 2@host-b\n")
	require.Contains(t, out, ":4\n", "no file completion")

	_, out, _ = vigilRun("__complete", "worker", "--address", addr, "describe", "cli-w-2")
	require.Contains(t, out, "cli-w-2\t")
	require.NotContains(t, out, "cli-w-1")

	_, out, _ = vigilRun("__complete", "activity", "describe", "--address", addr, "")
	require.Contains(t, out, "pay-9\tCharge payments Running\n")
	_, out, _ = vigilRun("__complete", "activity", "terminate", "--address", addr, "p")
	require.Contains(t, out, "pay-9\t")

	// A server that cannot be reached completes nothing, and says so to the shell.
	_, out, _ = vigilRun("__complete", "worker", "describe", "--address", "127.0.0.1:1", "--timeout", "1s", "")
	require.NotContains(t, out, "cli-w")
	require.Contains(t, out, ":5\n", "error and no file completion")
}

// TestEnvironmentAndProfiles: with no flags, vigil finds the server through VIGIL_ADDRESS, or
// the Temporal environment variables, or a temporal.toml profile.
func TestEnvironmentAndProfiles(t *testing.T) {
	addr := workerFixture(t)
	countWorkers := func(args ...string) int {
		t.Helper()
		code, out, stderr := vigilRun(append([]string{"worker", "list", "-o", "jsonl"}, args...)...)
		require.Equal(t, 0, code, stderr)
		return len(nonEmptyLines(out))
	}

	t.Setenv("TEMPORAL_ADDRESS", addr)
	require.Equal(t, 2, countWorkers(), "TEMPORAL_ADDRESS")
	t.Setenv("TEMPORAL_NAMESPACE", "nope")
	code, _, stderr := vigilRun("worker", "list")
	require.Equal(t, exitFailure, code, "TEMPORAL_NAMESPACE is used too")
	require.Contains(t, stderr, "nope")
	t.Setenv("VIGIL_NAMESPACE", "default")
	require.Equal(t, 2, countWorkers(), "VIGIL_NAMESPACE wins over TEMPORAL_NAMESPACE")

	t.Setenv("TEMPORAL_ADDRESS", "")
	t.Setenv("TEMPORAL_NAMESPACE", "")
	t.Setenv("VIGIL_NAMESPACE", "")
	t.Setenv("VIGIL_ADDRESS", addr)
	require.Equal(t, 2, countWorkers(), "VIGIL_ADDRESS")
	t.Setenv("VIGIL_ADDRESS", "")

	file := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(file, []byte(`
[profile.default]
address = "127.0.0.1:1"

[profile.vigil]
address = "`+addr+`"
namespace = "default"
`), 0o600))
	t.Setenv("TEMPORAL_CONFIG_FILE", file)
	require.Equal(t, 2, countWorkers("--profile", "vigil"), "--profile")
	t.Setenv("TEMPORAL_PROFILE", "vigil")
	require.Equal(t, 2, countWorkers(), "TEMPORAL_PROFILE")
	require.Equal(t, 2, countWorkers("--profile", "default", "--address", addr), "a flag wins over the profile")
}

// TestBashCompletion: in bash, with the script vigil completion bash prints, a worker
// instance key completes from the server.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	addr := workerFixture(t)
	dir := t.TempDir()
	// The test binary, linked as vigil, runs as the CLI (TestMain).
	self, err := os.Executable()
	require.NoError(t, err)
	require.NoError(t, os.Symlink(self, filepath.Join(dir, "vigil")))
	code, script, stderr := vigilRun("completion", "bash")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vigil.bash"), []byte(script), 0o600))

	complete := func(words ...string) []string {
		t.Helper()
		// _get_comp_words_by_ref stands in for the bash-completion package's.
		cmd := exec.Command(bash, append([]string{"--norc", "-c", `
_get_comp_words_by_ref() { cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
source "$DIR/vigil.bash"
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
__start_vigil vigil "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"`, "bash"}, words...)...)
		cmd.Env = append(os.Environ(), "DIR="+dir, "PATH="+dir+":"+os.Getenv("PATH"))
		out, err := cmd.Output()
		require.NoError(t, err)
		return nonEmptyLines(string(out))
	}
	require.Equal(t, []string{"list"}, complete("vigil", "worker", "l"))
	got := complete("vigil", "worker", "describe", "--address", addr, "cli-w-")
	require.Len(t, got, 2, "%q", got)
	require.True(t, strings.HasPrefix(got[0], "cli-w-1"), "%q", got)
	require.True(t, strings.HasPrefix(got[1], "cli-w-2"), "%q", got)
	require.Equal(t, []string{"cli-w-2"}, complete("vigil", "worker", "describe", "--address", addr, "cli-w-2"))
}
