package tests

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	_ "modernc.org/sqlite" // the driver the SQLite backend uses, to reach the file directly

	"github.com/vigilhq/vigil/tests/testcluster"
)

// TestVisibilityBackfilledAtStart: a database whose activities have no visibility rows, as one
// written before the visibility tables existed, gets them at the next start, and listings by
// a custom attribute, ordered, and counts find every activity again.
func TestVisibilityBackfilledAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{})
	path := cluster.Path()
	c := dialSDK(t, cluster.Address())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	registerOrderAttributes(t, ctx, c)
	for i, customer := range []string{"c-1", "c-2", "c-2"} {
		_, err := c.ExecuteActivity(ctx, client.StartActivityOptions{
			ID: "order-" + string(rune('1'+i)), TaskQueue: "backfill-nobody-polls", StartToCloseTimeout: time.Hour,
			TypedSearchAttributes: temporal.NewSearchAttributes(customerKey.ValueSet(customer), amountKey.ValueSet(int64(i))),
		}, "charge")
		require.NoError(t, err)
	}
	cluster.Stop()

	emptyVisibilityTables(t, ctx, path)

	cluster = testcluster.New(t, testcluster.Options{Path: path})
	c = dialSDK(t, cluster.Address())
	res, err := c.ListActivities(ctx, client.ListActivitiesOptions{Query: `CustomerId = "c-2" ORDER BY Amount DESC`})
	require.NoError(t, err)
	var ids []string
	for info, err := range res.Results {
		require.NoError(t, err)
		ids = append(ids, info.ActivityID)
	}
	require.Equal(t, []string{"order-3", "order-2"}, ids)
	count, err := c.CountActivities(ctx, client.CountActivitiesOptions{Query: `TaskQueue = "backfill-nobody-polls"`})
	require.NoError(t, err)
	require.EqualValues(t, 3, count.Count)
}

// emptyVisibilityTables leaves the stopped server's database as a binary that predates its
// visibility tables (or a migration that rebuilds them) does: no visibility rows, and no
// archetype backfilled.
func emptyVisibilityTables(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	for _, stmt := range []string{`DELETE FROM visibility`, `DELETE FROM visibility_attributes`, `DELETE FROM visibility_backfill`} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, db.Close())
}
