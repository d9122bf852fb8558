package persistencetest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/persistence"
)

func testNamespacesCreatedUpdatedAndListed(t *testing.T, b *bundle) {
	s := b.store
	list, err := s.ListNamespaces(b.ctx)
	require.NoError(t, err)
	require.Empty(t, list)

	orders := persistence.NamespaceRecord{ID: "id-orders", Name: "orders", Data: []byte(`{"d":1}`), CreateTime: baseTime, UpdateTime: baseTime}
	billing := persistence.NamespaceRecord{ID: "id-billing", Name: "billing", Data: []byte(`{}`), CreateTime: baseTime, UpdateTime: baseTime}
	require.NoError(t, s.CreateNamespace(b.ctx, orders))
	require.NoError(t, s.CreateNamespace(b.ctx, billing))
	var exists *persistence.AlreadyExistsError
	require.ErrorAs(t, s.CreateNamespace(b.ctx, persistence.NamespaceRecord{ID: "id-x", Name: "orders", CreateTime: baseTime}), &exists, "same name")
	require.ErrorAs(t, s.CreateNamespace(b.ctx, persistence.NamespaceRecord{ID: "id-orders", Name: "other", CreateTime: baseTime}), &exists, "same id")

	got, err := s.GetNamespace(b.ctx, "orders")
	require.NoError(t, err)
	orders.Version = 1
	require.Equal(t, orders, *got)
	var nf *persistence.NotFoundError
	_, err = s.GetNamespace(b.ctx, "missing")
	require.ErrorAs(t, err, &nf)

	list, err = s.ListNamespaces(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "billing", list[0].Name, "ordered by name")
	require.Equal(t, "orders", list[1].Name)

	updated := orders
	updated.Data, updated.Version, updated.UpdateTime = []byte(`{"d":2}`), 2, baseTime.Add(1)
	require.NoError(t, s.UpdateNamespace(b.ctx, updated))
	got, err = s.GetNamespace(b.ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, updated, *got)
	require.Equal(t, baseTime, got.CreateTime, "the creation time is kept")

	var conflict *persistence.NamespaceVersionConflictError
	require.ErrorAs(t, s.UpdateNamespace(b.ctx, updated), &conflict, "the same version again")
	stale := orders
	stale.Version = 2
	require.ErrorAs(t, s.UpdateNamespace(b.ctx, stale), &conflict)
	got, err = s.GetNamespace(b.ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, []byte(`{"d":2}`), got.Data, "a refused update leaves no trace")
	missing := updated
	missing.Name = "missing"
	require.ErrorAs(t, s.UpdateNamespace(b.ctx, missing), &nf)
}

func testConcurrentNamespaceUpdatesOneWins(t *testing.T, b *bundle) {
	s := b.store
	require.NoError(t, s.CreateNamespace(b.ctx, persistence.NamespaceRecord{ID: "id-a", Name: "a", Data: []byte("v1"), CreateTime: baseTime}))
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.UpdateNamespace(b.ctx, persistence.NamespaceRecord{ID: "id-a", Name: "a", Data: []byte{byte(i)}, Version: 2, UpdateTime: baseTime})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		var conflict *persistence.NamespaceVersionConflictError
		require.ErrorAs(t, err, &conflict)
	}
	require.Equal(t, 1, won, "exactly one update of version 1 wins")
	got, err := s.GetNamespace(b.ctx, "a")
	require.NoError(t, err)
	require.EqualValues(t, 2, got.Version)
}

func testNamespaceRenamedAndDeleted(t *testing.T, b *bundle) {
	s := b.store
	orders := persistence.NamespaceRecord{ID: "id-orders", Name: "orders", Data: []byte(`{}`), CreateTime: baseTime, UpdateTime: baseTime}
	require.NoError(t, s.CreateNamespace(b.ctx, orders))
	require.NoError(t, s.CreateNamespace(b.ctx, persistence.NamespaceRecord{ID: "id-taken", Name: "taken", CreateTime: baseTime}))

	renamed := orders
	renamed.Name, renamed.Data, renamed.Version, renamed.UpdateTime = "orders-deleted-id-or", []byte(`{"state":"deleted"}`), 2, baseTime.Add(1)
	var (
		conflict *persistence.NamespaceVersionConflictError
		exists   *persistence.AlreadyExistsError
		nf       *persistence.NotFoundError
	)
	stale := renamed
	stale.Version = 3
	require.ErrorAs(t, s.RenameNamespace(b.ctx, "orders", stale), &conflict)
	onto := renamed
	onto.Name = "taken"
	require.ErrorAs(t, s.RenameNamespace(b.ctx, "orders", onto), &exists)
	require.ErrorAs(t, s.RenameNamespace(b.ctx, "missing", renamed), &nf)
	got, err := s.GetNamespace(b.ctx, "orders")
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Version, "a refused rename leaves no trace")

	require.NoError(t, s.RenameNamespace(b.ctx, "orders", renamed))
	_, err = s.GetNamespace(b.ctx, "orders")
	require.ErrorAs(t, err, &nf, "the old name is free")
	got, err = s.GetNamespace(b.ctx, renamed.Name)
	require.NoError(t, err)
	require.Equal(t, renamed, *got)
	require.NoError(t, s.CreateNamespace(b.ctx, persistence.NamespaceRecord{ID: "id-orders-2", Name: "orders", CreateTime: baseTime}),
		"the name can be used again")

	require.NoError(t, s.DeleteNamespace(b.ctx, renamed.Name, "id-other"), "another ID is not this namespace")
	_, err = s.GetNamespace(b.ctx, renamed.Name)
	require.NoError(t, err)
	require.NoError(t, s.DeleteNamespace(b.ctx, renamed.Name, renamed.ID))
	_, err = s.GetNamespace(b.ctx, renamed.Name)
	require.ErrorAs(t, err, &nf)
	require.NoError(t, s.DeleteNamespace(b.ctx, renamed.Name, renamed.ID), "deleting again does nothing")
	list, err := s.ListNamespaces(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
}
