package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// vigil cluster describe takes the client flags every vigil command takes: against a server
// with auth on it needs an API key, and it lists the host with its shards.
func TestClusterDescribeWithAnAPIKey(t *testing.T) {
	const adminKey = "cluster-describe-admin-key-0123456789"
	cluster := testcluster.New(t, testcluster.Options{Auth: auth.Config{Enabled: true, AdminAPIKey: adminKey}})
	keyFile := filepath.Join(t.TempDir(), "admin.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(adminKey+"\n"), 0o600))

	var out, errOut bytes.Buffer
	code := run([]string{"cluster", "describe", "--address", cluster.Address(), "--output", "json"}, &out, &errOut)
	require.Equal(t, 1, code, "no credentials: %s", out.String())
	require.Contains(t, errOut.String(), "Unauthenticated")

	out.Reset()
	errOut.Reset()
	code = run([]string{"cluster", "describe", "--address", cluster.Address(), "--api-key-file", keyFile, "--output", "json"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Regexp(t, `"numShards":\s*4`, out.String())
	require.Contains(t, out.String(), cluster.Address(), "the host is listed with its frontend address")
}
