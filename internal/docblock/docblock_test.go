package docblock

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUpdateRewritesOnlyTheBlock(t *testing.T) {
	t.Parallel()
	b := Block{Begin: "<!-- begin -->", End: "<!-- end -->", Render: func(w io.Writer) error {
		_, err := io.WriteString(w, "| new |\n")
		return err
	}}
	path := filepath.Join(t.TempDir(), "page.md")
	require.NoError(t, os.WriteFile(path, []byte("# Page\n<!-- begin -->\n| old |\n<!-- end -->\ntail\n"), 0o644))

	changed, err := b.Update(path, false)
	require.NoError(t, err)
	require.True(t, changed, "the old block is stale")
	changed, err = b.Update(path, true)
	require.NoError(t, err)
	require.True(t, changed)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "# Page\n<!-- begin -->\n| new |\n<!-- end -->\ntail\n", string(got))
	changed, err = b.Update(path, false)
	require.NoError(t, err)
	require.False(t, changed, "current once written")
}

func TestUpdateNeedsTheMarkers(t *testing.T) {
	t.Parallel()
	b := Block{Begin: "<!-- begin -->", End: "<!-- end -->", Render: func(io.Writer) error { return nil }}
	path := filepath.Join(t.TempDir(), "page.md")
	require.NoError(t, os.WriteFile(path, []byte("no markers\n"), 0o644))
	_, err := b.Update(path, false)
	require.ErrorContains(t, err, "no \"<!-- begin -->\"")
}
