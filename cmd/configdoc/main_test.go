package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigurationListsTheDeclaredSettings fails when a dynamic config setting was declared,
// renamed, re-described or given a new default without regenerating docs/configuration.md.
func TestConfigurationListsTheDeclaredSettings(t *testing.T) {
	changed, err := block.Update("../../docs/configuration.md", false)
	require.NoError(t, err)
	require.False(t, changed, "docs/configuration.md's settings table is out of date: run make config-doc")
}
