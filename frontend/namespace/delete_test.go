package namespace

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
)

func TestDeleteNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RenamedRefusedAndTheNameFree", func(t *testing.T) {
		t.Parallel()
		store := NewMemoryStore()
		a, b := startHost(t, store), startHost(t, store)
		orig, err := a.Register(ctx, Namespace{Name: "orders", Description: "d"})
		require.NoError(t, err)
		_, err = b.GetByName("orders")
		require.NoError(t, err)

		ns, err := a.Delete(ctx, "orders", time.Hour)
		require.NoError(t, err)
		require.Equal(t, "orders-deleted-"+orig.ID[:5], ns.Name, "Temporal's name for a deleted namespace")
		require.True(t, ns.Deleted)
		require.Equal(t, "orders", ns.FormerName)
		require.Equal(t, ns.DeleteTime.Add(time.Hour), ns.PurgeTime)

		// Refused at once on this host, within a refresh on another.
		var notFound *serviceerror.NamespaceNotFound
		_, err = a.GetByName("orders")
		require.ErrorAs(t, err, &notFound)
		require.Eventually(t, func() bool {
			_, err := b.GetByName("orders")
			return err != nil
		}, 10*time.Second, 5*time.Millisecond)
		var invalidState *serviceerror.NamespaceInvalidState
		_, err = a.GetByName(ns.Name)
		require.ErrorAs(t, err, &invalidState)
		require.Equal(t, enumspb.NAMESPACE_STATE_DELETED, invalidState.State)
		_, err = a.GetByID(orig.ID)
		require.ErrorAs(t, err, &invalidState)
		got, err := a.Lookup(ns.Name)
		require.NoError(t, err, "describable")
		require.True(t, got.Deleted)
		require.NotContains(t, a.Names(), ns.Name)
		require.Len(t, a.Deleted(), 1)
		_, err = a.Update(ctx, ns.Name, func(*Namespace) error { return nil })
		require.ErrorAs(t, err, &invalidState, "a deleted namespace is not updated")
		_, err = a.Delete(ctx, "orders", 0)
		require.ErrorAs(t, err, &notFound, "deleted once")

		// The name is free: a new namespace, with an ID of its own.
		again, err := a.Register(ctx, Namespace{Name: "orders"})
		require.NoError(t, err)
		require.NotEqual(t, orig.ID, again.ID)
		again2, err := a.Delete(ctx, "orders", 0)
		require.NoError(t, err)
		require.NotEqual(t, ns.Name, again2.Name)

		// Purged: gone from the store and from the registry.
		require.NoError(t, a.Purge(ctx, ns))
		_, err = store.Get(ctx, ns.Name)
		require.ErrorIs(t, err, ErrNotFound)
		_, err = a.Lookup(ns.Name)
		require.ErrorAs(t, err, &notFound)
		require.Len(t, a.Deleted(), 1)
	})

	t.Run("NameTakenTakesMoreOfTheID", func(t *testing.T) {
		t.Parallel()
		store := NewMemoryStore()
		r := startHost(t, store)
		orig, err := r.Register(ctx, Namespace{Name: "a"})
		require.NoError(t, err)
		_, err = r.Register(ctx, Namespace{Name: "a-deleted-" + orig.ID[:5]})
		require.NoError(t, err)
		ns, err := r.Delete(ctx, "a", 0)
		require.NoError(t, err)
		require.Equal(t, "a-deleted-"+orig.ID[:6], ns.Name)
	})

	t.Run("ConfiguredAndStorelessAreRefused", func(t *testing.T) {
		t.Parallel()
		r := startHost(t, NewMemoryStore(), Config{Name: "orders"})
		var failed *serviceerror.FailedPrecondition
		for _, name := range []string{DefaultName, "orders"} {
			_, err := r.Delete(ctx, name, 0)
			require.ErrorAs(t, err, &failed, name)
			_, err = r.GetByName(name)
			require.NoError(t, err, "left as it was")
		}
		_, err := MustNewRegistry(Config{Name: "x"}).Delete(ctx, "x", 0)
		require.ErrorAs(t, err, &failed)
		var notFound *serviceerror.NamespaceNotFound
		_, err = r.Delete(ctx, "missing", 0)
		require.ErrorAs(t, err, &notFound)
	})

	t.Run("ADeletedNamespaceSurvivesARestart", func(t *testing.T) {
		t.Parallel()
		store := NewMemoryStore()
		r := startHost(t, store)
		_, err := r.Register(ctx, Namespace{Name: "orders"})
		require.NoError(t, err)
		ns, err := r.Delete(ctx, "orders", 0)
		require.NoError(t, err)
		r.Stop()
		restarted := startHost(t, store)
		deleted := restarted.Deleted()
		require.Len(t, deleted, 1)
		require.Equal(t, ns.Name, deleted[0].Name)
		require.Equal(t, "orders", deleted[0].FormerName)
		require.Equal(t, ns.DeleteTime.UTC(), deleted[0].DeleteTime.UTC())
	})
}
