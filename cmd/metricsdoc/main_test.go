package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEListsTheDeclaredMetrics fails when a metric was declared, renamed or re-described
// without regenerating README.md's table.
func TestREADMEListsTheDeclaredMetrics(t *testing.T) {
	changed, err := update("../../README.md", false)
	require.NoError(t, err)
	require.False(t, changed, "README.md's metrics table is out of date: run go run ./cmd/metricsdoc")
}
