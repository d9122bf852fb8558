package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"version"}, &out, &errOut))
	require.Equal(t, "vigil dev\n", out.String())

	out.Reset()
	require.Equal(t, 2, run([]string{"nope"}, &out, &errOut))
	require.Contains(t, errOut.String(), `unknown command "nope"`)
}

// TestHelpOnEveryCommand: --help (and -h) on every command and group prints its usage on
// stdout and exits 0, without running anything.
func TestHelpOnEveryCommand(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"help"}, {"-h"},
		{"worker", "--help"}, {"worker", "help"}, {"server", "-h"}, {"apikey", "--help"}, {"activity", "--help"},
		{"cluster", "--help"}, {"tasktoken", "--help"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, 0, run(args, &out, &errOut), "%v: %s", args, errOut.String())
		require.Contains(t, out.String(), "Usage:", "%v", args)
		require.Empty(t, errOut.String(), "%v", args)
	}
	for _, c := range commands {
		for _, flag := range []string{"--help", "-h"} {
			args := append(bytes.Fields([]byte(c.path)), []byte(flag))
			var strs []string
			for _, a := range args {
				strs = append(strs, string(a))
			}
			var out, errOut bytes.Buffer
			require.Equal(t, 0, run(strs, &out, &errOut), "%v: %s", strs, errOut.String())
			require.Contains(t, out.String(), "vigil "+c.path, "%v", strs)
			require.Empty(t, errOut.String(), "%v", strs)
		}
	}

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"worker", "list", "--help"}, &out, &errOut))
	require.Contains(t, out.String(), "-address", "the command's flags are listed")

	out.Reset()
	require.Equal(t, 0, run([]string{"server", "start", "--help"}, &out, &errOut))
	require.Contains(t, out.String(), "-log-format")

	out.Reset()
	errOut.Reset()
	require.Equal(t, 2, run([]string{"worker"}, &out, &errOut))
	require.Contains(t, errOut.String(), "vigil worker list")
}
