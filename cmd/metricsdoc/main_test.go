package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMetricsPageListsTheDeclaredMetrics fails when a metric was declared, renamed or re-described
// without regenerating docs/metrics.md's table.
func TestMetricsPageListsTheDeclaredMetrics(t *testing.T) {
	changed, err := block.Update("../../docs/metrics.md", false)
	require.NoError(t, err)
	require.False(t, changed, "docs/metrics.md's metrics table is out of date: run make metrics-doc")
}
