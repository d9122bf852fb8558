package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

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
	for _, format := range []string{"json", "jsonl", "yaml"} {
		code, stdout, stderr = vigil("apikey", "list", "--api-key", admin, "-o", format)
		require.Equal(t, 0, code, stderr)
		type keyDoc struct {
			ID          string `json:"id" yaml:"id"`
			Roles       string `json:"roles" yaml:"roles"`
			Description string `json:"description" yaml:"description"`
		}
		var keys []keyDoc
		switch format {
		case "json":
			require.NoError(t, json.Unmarshal([]byte(stdout), &keys), stdout)
		case "jsonl":
			require.Equal(t, 1, strings.Count(stdout, "\n"), stdout)
			keys = []keyDoc{{}}
			require.NoError(t, json.Unmarshal([]byte(stdout), &keys[0]), stdout)
		case "yaml":
			require.NoError(t, yaml.Unmarshal([]byte(stdout), &keys), stdout)
		}
		require.Len(t, keys, 1, format)
		require.Equal(t, id, keys[0].ID, format)
		require.Equal(t, "reader", keys[0].Roles, format)
		require.Equal(t, "dashboards", keys[0].Description, format)
		require.NotContains(t, stdout, key[len(auth.APIKeyPrefix)+17:], "the secret is never listed")
	}

	// Completion offers the live keys' IDs.
	code, stdout, _ = vigilRun("__complete", "apikey", "revoke", "--address", cluster.Address(), "--api-key", admin, "")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, id+"\treader dashboards\n")

	// -o json: the key with its record.
	code, stdout, stderr = vigil("apikey", "create", "--api-key", admin, "--role", "worker", "-o", "json")
	require.Equal(t, 0, code, stderr)
	var created struct {
		Key  string `json:"key"`
		Info struct {
			Roles string `json:"roles"`
		} `json:"info"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &created), stdout)
	require.True(t, strings.HasPrefix(created.Key, auth.APIKeyPrefix))
	require.Equal(t, "worker", created.Info.Roles)

	code, _, stderr = vigil("apikey", "create", "--api-key", key, "--role", "admin")
	require.Equal(t, 1, code, "a reader cannot mint keys")
	require.Contains(t, stderr, "PermissionDenied")

	code, stdout, stderr = vigil("tasktoken", "rotate", "--api-key", admin)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "key version 2")
	code, stdout, stderr = vigil("tasktoken", "rotate", "--api-key", admin, "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, `{"version": 3}`, stdout)
	code, _, _ = vigil("tasktoken", "rotate", "--api-key", key)
	require.Equal(t, 1, code, "a reader cannot rotate")

	code, _, stderr = vigil("apikey", "revoke", id, "--api-key", admin)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = vigil("worker", "list", "--api-key", key)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "revoked")
}
