package namespace

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
)

func TestRegistry(t *testing.T) {
	t.Parallel()

	t.Run("DefaultAlwaysExists", func(t *testing.T) {
		t.Parallel()
		r, err := NewRegistry(nil)
		require.NoError(t, err)
		ns, err := r.GetByName(DefaultName)
		require.NoError(t, err)
		require.Equal(t, DeriveID(DefaultName), ns.ID)
		require.Equal(t, []string{DefaultName}, r.Names())
	})

	t.Run("DerivedIDsAreStableUUIDv5", func(t *testing.T) {
		t.Parallel()
		a := MustNewRegistry(Config{Name: "orders"})
		b := MustNewRegistry(Config{Name: "billing"}, Config{Name: "orders"})
		nsA, err := a.GetByName("orders")
		require.NoError(t, err)
		nsB, err := b.GetByName("orders")
		require.NoError(t, err)
		require.Equal(t, nsA.ID, nsB.ID, "the ID must not depend on what else is configured")
		id := uuid.MustParse(nsA.ID)
		require.Equal(t, uuid.Version(5), id.Version())
		// Pinned: a change here moves every worker of every namespace to another shard.
		require.Equal(t, "6e7ce15b-1757-50b5-b0fd-77935f051164", DeriveID("default"))
	})

	t.Run("ConfiguredIDWins", func(t *testing.T) {
		t.Parallel()
		id := "11111111-2222-3333-4444-555555555555"
		r := MustNewRegistry(Config{Name: "renamed", ID: id, Description: "d"})
		ns, err := r.GetByName("renamed")
		require.NoError(t, err)
		require.Equal(t, id, ns.ID)
		byID, err := r.GetByID(id)
		require.NoError(t, err)
		require.Same(t, ns, byID)
	})

	t.Run("UnknownIsNamespaceNotFound", func(t *testing.T) {
		t.Parallel()
		_, err := MustNewRegistry().GetByName("nope")
		var nf *serviceerror.NamespaceNotFound
		require.ErrorAs(t, err, &nf)
		require.Equal(t, "nope", nf.Namespace)
	})

	t.Run("RejectsBadConfig", func(t *testing.T) {
		t.Parallel()
		for name, configs := range map[string][]Config{
			"EmptyName":     {{Name: ""}},
			"DuplicateName": {{Name: "a"}, {Name: "a"}},
			"DuplicateID": {
				{Name: "a", ID: "11111111-2222-3333-4444-555555555555"},
				{Name: "b", ID: "11111111-2222-3333-4444-555555555555"},
			},
			"IDNotUUID":   {{Name: "a", ID: "not-a-uuid"}},
			"SlashInName": {{Name: "a/b"}},
			"SpacedName":  {{Name: " a"}},
			"IDOfDerived": {{Name: "a", ID: DeriveID("default")}},
		} {
			_, err := NewRegistry(configs)
			require.Error(t, err, name)
		}
	})
}
