package namespace

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
)

func TestSearchAttributesAreStoredWithTheNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := NewMemoryStore()
	r, err := NewStoredRegistry([]Config{{Name: "orders"}}, store, StoreOptions{})
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx))
	t.Cleanup(r.Stop)

	ns, err := r.GetByName("orders")
	require.NoError(t, err)
	require.Empty(t, ns.SearchAttributes, "a record written before search attributes existed has none")

	_, err = r.Update(ctx, "orders", func(ns *Namespace) error {
		ns.SearchAttributes["Amount"] = enumspb.INDEXED_VALUE_TYPE_INT
		ns.SearchAttributes["Tags"] = enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST
		return nil
	})
	require.NoError(t, err)
	before, err := r.GetByName("orders")
	require.NoError(t, err)

	// Another registry on the same store (another host) reads them back, and an update of
	// other settings keeps them.
	other, err := NewStoredRegistry(nil, store, StoreOptions{})
	require.NoError(t, err)
	require.NoError(t, other.Start(ctx))
	t.Cleanup(other.Stop)
	_, err = other.Update(ctx, "orders", func(ns *Namespace) error { ns.Description = "changed"; return nil })
	require.NoError(t, err)
	got, err := other.GetByName("orders")
	require.NoError(t, err)
	require.Equal(t, map[string]enumspb.IndexedValueType{
		"Amount": enumspb.INDEXED_VALUE_TYPE_INT, "Tags": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	}, got.SearchAttributes)
	require.Len(t, before.SearchAttributes, 2, "a published namespace is never modified")

	stored, err := store.Get(ctx, "orders")
	require.NoError(t, err)
	require.Contains(t, string(stored.Data), `"searchAttributes":{"Amount":"Int","Tags":"KeywordList"}`)

	stored.Data = []byte(`{"searchAttributes":{"Amount":"Integer"}}`)
	_, err = decode(stored)
	require.ErrorContains(t, err, `unknown type "Integer"`)
}
