package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/common/buildinfo"
)

// TestMain keeps the tests from the environment they run in: no VIGIL_* or TEMPORAL_*
// variable (but the VIGIL_TEST_* a test hands its subprocess), and a Temporal configuration
// file that does not exist.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "vigil" {
		// Run as the vigil binary, through a link named vigil (TestBashCompletion).
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if (strings.HasPrefix(k, "VIGIL_") && !strings.HasPrefix(k, "VIGIL_TEST_")) || strings.HasPrefix(k, "TEMPORAL_") {
			_ = os.Unsetenv(k)
		}
	}
	dir, err := os.MkdirTemp("", "vigil-cli-test")
	if err != nil {
		panic(err)
	}
	_ = os.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(dir, "absent.toml"))
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// vigilRun runs a command line and returns its exit status, stdout and stderr.
func vigilRun(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVersion(t *testing.T) {
	info := buildinfo.Get()
	code, out, stderr := vigilRun("version")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "vigil "+info.Version+"\ncommit  "+info.Commit+"\nbuilt   "+info.Date+"\ngo      "+info.GoVersion+"\n", out)

	code, flagOut, _ := vigilRun("--version")
	require.Equal(t, 0, code)
	require.Equal(t, out, flagOut, "vigil --version prints what vigil version prints")

	code, out, _ = vigilRun("version", "-o", "json")
	require.Equal(t, 0, code)
	var got buildinfo.Info
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Equal(t, info, got)

	code, out, _ = vigilRun("version", "-o", "yaml")
	require.Equal(t, 0, code)
	require.Contains(t, out, "version: "+info.Version+"\n")
}

// TestExitCodes: a wrong command line exits 2, a failure 1, each with one "vigil: ..." line
// on stderr and nothing on stdout.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"nope"}, exitUsage, `unknown command "nope" for "vigil"`},
		{[]string{"worker"}, exitUsage, "which one? (describe, list, watch)"},
		{[]string{"worker", "nope"}, exitUsage, `unknown command "nope" for "vigil worker"`},
		{[]string{"worker", "list", "--nope"}, exitUsage, "unknown flag: --nope"},
		{[]string{"worker", "list", "-address", "x"}, exitUsage, "long flags take two dashes"},
		{[]string{"worker", "list", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"worker", "list", "--state", "sleepy"}, exitUsage, `unknown state "sleepy"`},
		{[]string{"worker", "list", "-o", "xml"}, exitUsage, `unknown output format "xml"`},
		{[]string{"worker", "list", "--timeout", "soon"}, exitUsage, `invalid argument "soon"`},
		{[]string{"worker", "describe"}, exitUsage, "missing WORKER_INSTANCE_KEY"},
		{[]string{"activity", "cancel"}, exitUsage, "missing ACTIVITY_ID"},
		{[]string{"apikey", "create"}, exitUsage, `required flag(s) "role" not set`},
		{[]string{"server", "start", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"bench", "--api", "nope"}, exitUsage, `api "nope"`},
		{[]string{"worker", "list", "--address", "127.0.0.1:1", "--timeout", "2s"}, exitFailure, "Unavailable: "},
		{[]string{"worker", "list", "--api-key-file", "/nonexistent/key"}, exitFailure, "--api-key-file: open /nonexistent/key"},
		{[]string{"cluster", "describe", "--profile", "nope"}, exitFailure, "unable to find profile nope"},
		{[]string{"server", "start", "--config", "/nonexistent/vigil.yaml"}, exitFailure, "/nonexistent/vigil.yaml"},
	} {
		code, out, stderr := vigilRun(tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		require.Empty(t, out, "%v", tc.args)
		require.True(t, strings.HasPrefix(stderr, "vigil: "), "%v: %q", tc.args, stderr)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %q", tc.args, stderr)
		require.Contains(t, stderr, tc.want, "%v", tc.args)
	}
}

// TestHelpOnEveryCommand: --help and -h on every command print its usage on stdout and exit 0
// without running anything; "vigil" alone and "vigil help" print the command list.
func TestHelpOnEveryCommand(t *testing.T) {
	for _, args := range [][]string{{}, {"--help"}, {"help"}, {"-h"}, {"help", "worker", "list"}} {
		code, out, stderr := vigilRun(args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		require.Contains(t, out, "Usage:", "%v", args)
		require.Empty(t, stderr, "%v", args)
	}
	var paths [][]string
	walk(newRootCmd(nil, nil), func(c *cobra.Command) {
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
	})
	require.Greater(t, len(paths), 15)
	for _, p := range paths {
		for _, flag := range []string{"--help", "-h"} {
			args := append(append([]string{}, p...), flag)
			code, out, stderr := vigilRun(args...)
			require.Equal(t, 0, code, "%v: %s", args, stderr)
			require.Contains(t, out, "Usage:", "%v", args)
			require.Contains(t, out, strings.Join(append([]string{"vigil"}, p...), " "), "%v", args)
			require.Empty(t, stderr, "%v", args)
		}
	}

	_, out, _ := vigilRun("worker", "list", "--help")
	require.Contains(t, out, "--address", "the connection flags are listed")
	require.Contains(t, out, "--output", "and the global ones")
	require.NotContains(t, out, "--tls-ca ", "a former name is hidden")
	_, out, _ = vigilRun("server", "start", "--help")
	require.Contains(t, out, "--log-format")
	require.NotContains(t, out, "--api-key", "the server takes no connection flags")
}

// TestCLIDocIsCurrent fails when docs/cli.md's reference differs from the command tree.
func TestCLIDocIsCurrent(t *testing.T) {
	changed, err := updateCLIDoc("../../docs/cli.md", false)
	require.NoError(t, err)
	require.False(t, changed, "docs/cli.md's command reference is out of date: run make cli-doc")
}

// TestCLIDocCheck: `vigil docs --check` fails on a stale file and `vigil docs` rewrites it.
func TestCLIDocCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cli.md")
	require.NoError(t, os.WriteFile(path, []byte("# CLI\n\nprose\n\n"+docBegin+"\nstale\n"+docEnd+"\n\nmore prose\n"), 0o644))
	code, _, stderr := vigilRun("docs", "--check", path)
	require.Equal(t, exitFailure, code)
	require.Contains(t, stderr, "out of date")
	code, _, stderr = vigilRun("docs", path)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = vigilRun("docs", "--check", path)
	require.Equal(t, 0, code, stderr)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(data), "# CLI\n\nprose\n\n"+docBegin+"\n"))
	require.True(t, strings.HasSuffix(string(data), docEnd+"\n\nmore prose\n"))
	require.Contains(t, string(data), "## vigil worker describe")
	require.Contains(t, string(data), "`--moved-activities`")
}

// TestCompletionScripts: vigil completion prints a script for each shell.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_vigil", "zsh": "#compdef vigil", "fish": "complete -c vigil"} {
		code, out, stderr := vigilRun("completion", shell)
		require.Equal(t, 0, code, "%s: %s", shell, stderr)
		require.Contains(t, out, want, shell)
	}
	// Static completions: commands and flag values.
	_, out, _ := vigilRun("__complete", "worker", "")
	require.Contains(t, out, "describe\t")
	require.Contains(t, out, "watch\t")
	_, out, _ = vigilRun("__complete", "worker", "list", "--state", "")
	require.Contains(t, out, "inactive\n")
	_, out, _ = vigilRun("__complete", "worker", "list", "-o", "")
	require.Contains(t, out, "jsonl\n")
}
