package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// resolveWith resolves the connection of a command line args under env (and nothing else
// from the process's environment).
func resolveWith(t *testing.T, env map[string]string, args ...string) (*connSettings, error) {
	t.Helper()
	cf := newClientFlags()
	cf.env = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cmd := &cobra.Command{Use: "x"}
	cf.register(cmd)
	require.NoError(t, cmd.PersistentFlags().Parse(args))
	return cf.settings()
}

const testProfiles = `
[profile.default]
address = "default.example:7233"
namespace = "fromfile"

[profile.cloud]
address = "cloud.example:7233"
namespace = "orders"
api_key = "cloud-key"

[profile.local]
address = "127.0.0.1:7300"
api_key = "local-key"
[profile.local.tls]
disabled = true
[profile.local.grpc_meta]
x-tenant = "blue"
`

func TestConnectionSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "temporal.toml")
	require.NoError(t, os.WriteFile(file, []byte(testProfiles), 0o600))
	absent := map[string]string{"TEMPORAL_CONFIG_FILE": filepath.Join(dir, "absent.toml")}

	// Nothing set: the defaults, plaintext, no key.
	s, err := resolveWith(t, absent)
	require.NoError(t, err)
	require.Equal(t, addressDefault, s.address)
	require.Equal(t, namespaceDefault, s.namespace)
	require.Empty(t, s.apiKey)
	require.Nil(t, s.tls)

	// TEMPORAL_* alone: used, as the temporal CLI uses them; its API key turns TLS on.
	s, err = resolveWith(t, map[string]string{"TEMPORAL_CONFIG_FILE": absent["TEMPORAL_CONFIG_FILE"],
		"TEMPORAL_ADDRESS": "t.example:7233", "TEMPORAL_NAMESPACE": "tns", "TEMPORAL_API_KEY": "tkey"})
	require.NoError(t, err)
	require.Equal(t, "t.example:7233", s.address)
	require.Equal(t, "tns", s.namespace)
	require.Equal(t, "tkey", s.apiKey)
	require.NotNil(t, s.tls, "a Temporal API key implies TLS")

	// VIGIL_* win over TEMPORAL_*, flags over both.
	env := map[string]string{"TEMPORAL_CONFIG_FILE": absent["TEMPORAL_CONFIG_FILE"],
		"TEMPORAL_ADDRESS": "t.example:7233", "TEMPORAL_NAMESPACE": "tns",
		"VIGIL_ADDRESS": "v.example:7233", "VIGIL_NAMESPACE": "vns", "VIGIL_API_KEY": "vkey"}
	s, err = resolveWith(t, env)
	require.NoError(t, err)
	require.Equal(t, "v.example:7233", s.address)
	require.Equal(t, "vns", s.namespace)
	require.Equal(t, "vkey", s.apiKey)
	require.Nil(t, s.tls, "vigil's own API key does not imply TLS")
	s, err = resolveWith(t, env, "--address", "f.example:7233", "-n", "fns", "--api-key", "fkey")
	require.NoError(t, err)
	require.Equal(t, "f.example:7233", s.address)
	require.Equal(t, "fns", s.namespace)
	require.Equal(t, "fkey", s.apiKey)

	// --api-key-file: its first line.
	keyFile := filepath.Join(dir, "key")
	require.NoError(t, os.WriteFile(keyFile, []byte("file-key\nignored\n"), 0o600))
	s, err = resolveWith(t, env, "--api-key-file", keyFile)
	require.NoError(t, err)
	require.Equal(t, "file-key", s.apiKey)

	// The configuration file: the default profile, or the one named by TEMPORAL_PROFILE or
	// --profile; TEMPORAL_* over the file.
	fileEnv := map[string]string{"TEMPORAL_CONFIG_FILE": file}
	s, err = resolveWith(t, fileEnv)
	require.NoError(t, err)
	require.Equal(t, "default.example:7233", s.address)
	require.Equal(t, "fromfile", s.namespace)
	s, err = resolveWith(t, map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "cloud"})
	require.NoError(t, err)
	require.Equal(t, "cloud.example:7233", s.address)
	require.Equal(t, "cloud-key", s.apiKey)
	require.NotNil(t, s.tls)
	s, err = resolveWith(t, fileEnv, "--profile", "cloud", "--tls=false")
	require.NoError(t, err)
	require.Equal(t, "orders", s.namespace)
	require.Nil(t, s.tls, "--tls=false turns off the TLS a profile's key implies")
	s, err = resolveWith(t, map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_NAMESPACE": "over"}, "--profile", "local")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7300", s.address)
	require.Equal(t, "over", s.namespace, "TEMPORAL_* over the file")
	require.Equal(t, "local-key", s.apiKey)
	require.Nil(t, s.tls, "the profile disables TLS")
	require.Equal(t, map[string]string{"x-tenant": "blue"}, s.meta)
	s, err = resolveWith(t, map[string]string{}, "--config-file", file, "--profile", "cloud", "--tls-server-name", "sni.example")
	require.NoError(t, err)
	require.Equal(t, "sni.example", s.tls.ServerName)

	// --disable-config-file and --disable-config-env.
	s, err = resolveWith(t, map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_NAMESPACE": "over"}, "--disable-config-file")
	require.NoError(t, err)
	require.Equal(t, addressDefault, s.address)
	require.Equal(t, "over", s.namespace)
	s, err = resolveWith(t, map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_NAMESPACE": "over"}, "--disable-config-env")
	require.NoError(t, err)
	require.Equal(t, "fromfile", s.namespace)

	// A profile named but absent is an error; so is a CA file that is not PEM.
	_, err = resolveWith(t, fileEnv, "--profile", "nope")
	require.ErrorContains(t, err, "unable to find profile nope")
	_, err = resolveWith(t, absent, "--tls-ca-path", keyFile)
	require.ErrorContains(t, err, "TLS")
	// The former name of --tls-ca-path still works.
	_, err = resolveWith(t, absent, "--tls-ca", keyFile)
	require.ErrorContains(t, err, "TLS")
	s, err = resolveWith(t, absent, "--tls")
	require.NoError(t, err)
	require.NotNil(t, s.tls)
}
