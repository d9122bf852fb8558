package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/tests/testcluster"
)

func TestAPIKeyCommands(t *testing.T) {
	const admin = "admin-key-for-cli-tests-0123456789"
	cluster := testcluster.New(t, testcluster.Options{Auth: auth.Config{Enabled: true, AdminAPIKey: admin}})
	vigil := func(args ...string) (code int, stdout, stderr string) {
		var out, errOut bytes.Buffer
		code = run(append(args, "--address", cluster.Address()), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, _, stderr := vigil("worker", "list")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "Unauthenticated")

	code, stdout, stderr := vigil("apikey", "create", "--api-key", admin, "--namespace", "default", "--role", "reader", "--description", "dashboards")
	require.Equal(t, 0, code, stderr)
	key := strings.TrimSpace(stdout)
	require.True(t, strings.HasPrefix(key, auth.APIKeyPrefix), "the key alone on stdout: %q", stdout)
	require.Equal(t, 1, strings.Count(stdout, "\n"))
	require.Contains(t, stderr, "shown only this once")

	code, _, stderr = vigil("worker", "list", "--api-key", key)
	require.Equal(t, 0, code, stderr)

	code, stdout, _ = vigil("apikey", "list", "--api-key", admin)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "dashboards")
	require.NotContains(t, stdout, key[len(auth.APIKeyPrefix)+17:], "the secret is never listed")
	id := strings.Fields(strings.Split(stdout, "\n")[1])[0]

	code, _, stderr = vigil("apikey", "create", "--api-key", key, "--role", "admin")
	require.Equal(t, 1, code, "a reader cannot mint keys")
	require.Contains(t, stderr, "PermissionDenied")

	code, stdout, stderr = vigil("tasktoken", "rotate", "--api-key", admin)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "key version 2")
	code, _, _ = vigil("tasktoken", "rotate", "--api-key", key)
	require.Equal(t, 1, code, "a reader cannot rotate")

	code, _, stderr = vigil("apikey", "revoke", id, "--api-key", admin)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = vigil("worker", "list", "--api-key", key)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "revoked")
}
