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
