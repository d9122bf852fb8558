package persistencetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/persistence"
)

func testAPIKeysStoredRevokedAndListed(t *testing.T, b *bundle) {
	s := b.store
	k1 := persistence.APIKeyRecord{ID: "k1", Hash: []byte{1, 2, 3}, Namespace: "ns-a", Roles: "worker", Description: "fleet", CreateTime: baseTime}
	k2 := persistence.APIKeyRecord{ID: "k2", Hash: []byte{4, 5, 6}, Namespace: "ns-b", Roles: "reader,writer", CreateTime: baseTime}
	require.NoError(t, s.CreateAPIKey(b.ctx, k1))
	require.NoError(t, s.CreateAPIKey(b.ctx, k2))

	var exists *persistence.AlreadyExistsError
	require.ErrorAs(t, s.CreateAPIKey(b.ctx, persistence.APIKeyRecord{ID: "k1", Hash: []byte{9}, CreateTime: baseTime}), &exists, "same ID")
	require.ErrorAs(t, s.CreateAPIKey(b.ctx, persistence.APIKeyRecord{ID: "k3", Hash: []byte{1, 2, 3}, CreateTime: baseTime}), &exists, "same hash")

	got, err := s.GetAPIKeyByHash(b.ctx, []byte{1, 2, 3})
	require.NoError(t, err)
	require.Equal(t, k1, *got)
	var nf *persistence.NotFoundError
	_, err = s.GetAPIKeyByHash(b.ctx, []byte{7})
	require.ErrorAs(t, err, &nf)

	all, err := s.ListAPIKeys(b.ctx, "")
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, "k1", all[0].ID)
	require.Equal(t, "k2", all[1].ID)
	onlyB, err := s.ListAPIKeys(b.ctx, "ns-b")
	require.NoError(t, err)
	require.Len(t, onlyB, 1)
	require.Equal(t, "k2", onlyB[0].ID)

	revoked := baseTime.Add(1)
	require.NoError(t, s.RevokeAPIKey(b.ctx, "k1", revoked))
	require.NoError(t, s.RevokeAPIKey(b.ctx, "k1", revoked.Add(5)), "revoking twice is a success")
	got, err = s.GetAPIKeyByHash(b.ctx, []byte{1, 2, 3})
	require.NoError(t, err)
	require.Equal(t, revoked, got.RevokeTime, "the first revocation time is kept")
	got, err = s.GetAPIKeyByHash(b.ctx, []byte{4, 5, 6})
	require.NoError(t, err)
	require.True(t, got.RevokeTime.IsZero(), "the other key is untouched")
	require.ErrorAs(t, s.RevokeAPIKey(b.ctx, "missing", revoked), &nf)
}

func testClusterKeysFirstWriterWins(t *testing.T, b *bundle) {
	s := b.store
	keys, err := s.ListClusterKeys(b.ctx)
	require.NoError(t, err)
	require.Empty(t, keys)

	require.NoError(t, s.AddClusterKey(b.ctx, persistence.ClusterKey{Version: 1, Secret: []byte("first"), CreateTime: baseTime}))
	require.NoError(t, s.AddClusterKey(b.ctx, persistence.ClusterKey{Version: 1, Secret: []byte("second"), CreateTime: baseTime}))
	require.NoError(t, s.AddClusterKey(b.ctx, persistence.ClusterKey{Version: 2, Secret: []byte("rotated"), CreateTime: baseTime.Add(1)}))
	require.Error(t, s.AddClusterKey(b.ctx, persistence.ClusterKey{Version: 3}), "an empty secret is refused")

	keys, err = s.ListClusterKeys(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []persistence.ClusterKey{
		{Version: 2, Secret: []byte("rotated"), CreateTime: baseTime.Add(1)},
		{Version: 1, Secret: []byte("first"), CreateTime: baseTime},
	}, keys)
}
