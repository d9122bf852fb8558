package namespace

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap/zaptest"
)

// startHost starts a registry on store, as one host of a cluster does.
func startHost(t *testing.T, store Store, configs ...Config) *Registry {
	t.Helper()
	r, err := NewStoredRegistry(configs, store, StoreOptions{RefreshInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(r.Stop)
	return r
}

func TestStoredRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ConfiguredNamespacesAreCreatedAtStart", func(t *testing.T) {
		t.Parallel()
		store := NewMemoryStore()
		startHost(t, store, Config{Name: "orders", Description: "from config"})
		for _, name := range []string{DefaultName, "orders"} {
			stored, err := store.Get(ctx, name)
			require.NoError(t, err)
			require.Equal(t, DeriveID(name), stored.ID, "the ID a configured namespace always had")
		}
		// A second host with the same configuration starts on the same rows.
		r2 := startHost(t, store, Config{Name: "orders", Description: "from config"})
		require.Equal(t, []string{DefaultName, "orders"}, r2.Names())
	})

	t.Run("ConfiguredIDThatDisagreesWithTheStoreIsRefused", func(t *testing.T) {
		t.Parallel()
		store := NewMemoryStore()
		startHost(t, store, Config{Name: "orders"})
		r, err := NewStoredRegistry([]Config{{Name: "orders", ID: "11111111-2222-3333-4444-555555555555"}}, store, StoreOptions{})
		require.NoError(t, err)
		require.ErrorContains(t, r.Start(ctx), "holds it with id")
	})

	t.Run("RegisteredThroughOneHostIsKnownToAnotherAtOnce", func(t *testing.T) {
		t.Parallel()
		store := NewMemoryStore()
		a, b := startHost(t, store), startHost(t, store)
		ns, err := a.Register(ctx, Namespace{Name: "fresh", Description: "made at run time", Retention: 72 * time.Hour, Data: map[string]string{"team": "pay"}})
		require.NoError(t, err)
		require.Equal(t, DeriveID("fresh"), ns.ID)
		got, err := b.GetByName("fresh") // b has not refreshed: the miss reads the store
		require.NoError(t, err)
		require.Equal(t, "made at run time", got.Description)
		require.Equal(t, 72*time.Hour, got.Retention)
		require.Equal(t, "pay", got.Data["team"])
		byID, err := b.GetByID(ns.ID)
		require.NoError(t, err)
		require.Equal(t, "fresh", byID.Name)

		_, err = b.Register(ctx, Namespace{Name: "fresh"})
		var exists *serviceerror.NamespaceAlreadyExists
		require.ErrorAs(t, err, &exists)
		_, err = a.Register(ctx, Namespace{Name: "bad/name"})
		var invalid *serviceerror.InvalidArgument
		require.ErrorAs(t, err, &invalid)
	})

	t.Run("UpdateReachesEveryHost", func(t *testing.T) {
		t.Parallel()
		store := NewMemoryStore()
		a, b := startHost(t, store, Config{Name: "orders"}), startHost(t, store, Config{Name: "orders"})
		_, err := b.GetByName("orders")
		require.NoError(t, err)
		updated, err := a.Update(ctx, "orders", func(ns *Namespace) error { ns.OwnerEmail = "ops@example.com"; return nil })
		require.NoError(t, err)
		require.EqualValues(t, 2, updated.Version)
		got, err := a.GetByName("orders")
		require.NoError(t, err)
		require.Equal(t, "ops@example.com", got.OwnerEmail, "the writing host sees its write at once")
		require.Eventually(t, func() bool {
			got, err := b.GetByName("orders")
			return err == nil && got.OwnerEmail == "ops@example.com"
		}, 10*time.Second, 5*time.Millisecond, "the other host within its refresh interval")

		// A restarted host keeps the update: the store wins over the configuration.
		c := startHost(t, store, Config{Name: "orders"})
		got, err = c.GetByName("orders")
		require.NoError(t, err)
		require.Equal(t, "ops@example.com", got.OwnerEmail)

		_, err = a.Update(ctx, "missing", func(*Namespace) error { return nil })
		var nf *serviceerror.NamespaceNotFound
		require.ErrorAs(t, err, &nf)
	})

	t.Run("ConcurrentUpdatesAreAllApplied", func(t *testing.T) {
		t.Parallel()
		store := NewMemoryStore()
		a, b := startHost(t, store, Config{Name: "orders"}), startHost(t, store, Config{Name: "orders"})
		var wg sync.WaitGroup
		const n = 4
		errs := make([]error, 2*n)
		for i := range 2 * n {
			host := a
			if i%2 == 1 {
				host = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = host.Update(ctx, "orders", func(ns *Namespace) error { ns.Data[fmt.Sprint(i)] = "x"; return nil })
			}()
		}
		wg.Wait()
		stored, err := store.Get(ctx, "orders")
		require.NoError(t, err)
		ns, err := decode(stored)
		require.NoError(t, err)
		applied := 0
		for i, err := range errs {
			var aborted *serviceerror.Aborted
			if errors.As(err, &aborted) {
				continue // lost every retry to the others: said so, and nothing half-written
			}
			require.NoError(t, err)
			require.Contains(t, ns.Data, fmt.Sprint(i))
			applied++
		}
		require.Len(t, ns.Data, applied, "no update lost or half-applied")
		require.Positive(t, applied)
	})

	t.Run("StoreDownKeepsTheLastKnownNamespaces", func(t *testing.T) {
		t.Parallel()
		store := NewMemoryStore()
		r := startHost(t, store, Config{Name: "orders"})
		store.SetFail(errors.New("database unreachable"))
		_, err := r.GetByName("orders")
		require.NoError(t, err)
		_, err = r.GetByName("unknown")
		var nf *serviceerror.NamespaceNotFound
		require.ErrorAs(t, err, &nf)
		_, err = r.Register(ctx, Namespace{Name: "fresh"})
		var unavailable *serviceerror.Unavailable
		require.ErrorAs(t, err, &unavailable)
	})

	t.Run("WithoutAStoreNothingChanges", func(t *testing.T) {
		t.Parallel()
		r := MustNewRegistry()
		_, err := r.Register(ctx, Namespace{Name: "fresh"})
		var fp *serviceerror.FailedPrecondition
		require.ErrorAs(t, err, &fp)
		_, err = r.Register(ctx, Namespace{Name: DefaultName})
		var exists *serviceerror.NamespaceAlreadyExists
		require.ErrorAs(t, err, &exists)
	})
}
