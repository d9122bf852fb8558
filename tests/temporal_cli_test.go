package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/tests/testcluster"
)

// temporalCLI is the `temporal` CLI binary: $VIGIL_TEMPORAL_CLI, else `temporal` on PATH.
// Build it with `go install github.com/temporalio/cli/cmd/temporal@v1.5.1` (through the Go
// module proxy; it takes minutes).
func temporalCLI(t *testing.T) string {
	if p := os.Getenv("VIGIL_TEMPORAL_CLI"); p != "" {
		return p
	}
	p, err := exec.LookPath("temporal")
	if err != nil {
		t.Skip("no temporal CLI: set VIGIL_TEMPORAL_CLI or put temporal on PATH")
	}
	return p
}

// TestTemporalCLI drives the real `temporal` CLI against an in-process server.
func TestTemporalCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	bin := temporalCLI(t)
	cluster := testcluster.New(t, testcluster.Options{Namespaces: []string{"orders"}})
	temporal := func(args ...string) (string, error) {
		out, err := exec.Command(bin, append(args, "--address", cluster.Address())...).CombinedOutput()
		return string(out), err
	}

	out, err := temporal("operator", "cluster", "health")
	require.NoError(t, err, out)
	require.Contains(t, out, "SERVING")
	require.NotContains(t, out, "NOT_SERVING")

	out, err = temporal("operator", "namespace", "describe", "-n", "default")
	require.NoError(t, err, out)
	require.Regexp(t, `ReplicationConfig.ActiveClusterName\s+active`, out)
	require.Regexp(t, `NamespaceInfo.State\s+Registered`, out)

	out, err = temporal("operator", "namespace", "list")
	require.NoError(t, err, out)
	require.Regexp(t, `NamespaceInfo.Name\s+default`, out)
	require.Regexp(t, `NamespaceInfo.Name\s+orders`, out)

	out, err = temporal("operator", "namespace", "create", "-n", "fresh")
	require.Error(t, err, out)
	require.Contains(t, out, "server configuration")
	out, err = temporal("operator", "namespace", "create", "-n", "orders")
	require.Error(t, err, out)
	require.Contains(t, out, "already exists")

	out, err = temporal("worker", "list")
	require.NoError(t, err, out)
	require.True(t, strings.Contains(out, "WorkerInstanceKey"), out)
}
