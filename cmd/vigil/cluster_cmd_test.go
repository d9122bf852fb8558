package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

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

	vigil := func(args ...string) (int, string, string) {
		return vigilRun(append(args, "--address", cluster.Address(), "--api-key-file", keyFile)...)
	}
	code, table, stderr := vigil("cluster", "describe")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `^HOST ID\s+FRONTEND\s+HISTORY\s+SHARDS`, table)
	require.Regexp(t, `\s+`+regexp.QuoteMeta(cluster.Address())+`\s+\S+\s+4 \[1 2 3 4\]`, table)
	require.Contains(t, table, "4 shards; answered by ")
	code, table, _ = vigil("cluster", "describe", "--no-header")
	require.Equal(t, 0, code)
	require.NotContains(t, table, "HOST ID")
	code, jsonl, stderr := vigil("cluster", "describe", "-o", "jsonl")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 1, strings.Count(jsonl, "\n"))
	var doc struct {
		NumShards int `json:"numShards" yaml:"numShards"`
		Hosts     []struct {
			FrontendAddress string `json:"frontendAddress" yaml:"frontendAddress"`
		} `json:"hosts" yaml:"hosts"`
	}
	require.NoError(t, json.Unmarshal([]byte(jsonl), &doc))
	require.Equal(t, 4, doc.NumShards)
	code, y, stderr := vigil("cluster", "describe", "-o", "yaml")
	require.Equal(t, 0, code, stderr)
	doc.NumShards = 0
	require.NoError(t, yaml.Unmarshal([]byte(y), &doc), y)
	require.Equal(t, 4, doc.NumShards)
	require.Equal(t, cluster.Address(), doc.Hosts[0].FrontendAddress)
}
