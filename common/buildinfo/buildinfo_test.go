package buildinfo

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGetFillsEveryField(t *testing.T) {
	i := Get()
	require.NotEmpty(t, i.Version)
	require.NotEmpty(t, i.Commit)
	require.NotEmpty(t, i.Date)
	require.NotEmpty(t, i.GoVersion)
}
