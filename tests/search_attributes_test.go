package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/vigilhq/vigil/tests/testcluster"
)

var (
	customerKey = temporal.NewSearchAttributeKeyKeyword("CustomerId")
	amountKey   = temporal.NewSearchAttributeKeyInt64("Amount")
	tagsKey     = temporal.NewSearchAttributeKeyKeywordList("Tags")
	dueKey      = temporal.NewSearchAttributeKeyTime("DueAt")
)

// amountAttribute is search attributes with Amount set (for tests where temporal is shadowed).
func amountAttribute(v int64) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(amountKey.ValueSet(v))
}

func registerOrderAttributes(t *testing.T, ctx context.Context, c client.Client) {
	t.Helper()
	_, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: "default",
		SearchAttributes: map[string]enumspb.IndexedValueType{
			"CustomerId": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
			"Amount":     enumspb.INDEXED_VALUE_TYPE_INT,
			"Tags":       enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
			"DueAt":      enumspb.INDEXED_VALUE_TYPE_DATETIME,
		},
	})
	require.NoError(t, err)
}

// TestActivitySearchAttributesAndSummary registers search attributes through the Go SDK's
// OperatorService client, starts standalone activities with typed search attributes, a summary
// and details, and reads them back through Describe, List (by query, ordered) and Count
// (grouped by status).
func TestActivitySearchAttributesAndSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	cluster := testcluster.New(t, testcluster.Options{})
	c := dialSDK(t, cluster.Address())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	registerOrderAttributes(t, ctx, c)

	due := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	start := func(id, customer string, amount int64, tags ...string) client.ActivityHandle {
		t.Helper()
		h, err := c.ExecuteActivity(ctx, client.StartActivityOptions{
			ID: id, TaskQueue: "sa-nobody-polls", StartToCloseTimeout: time.Hour,
			TypedSearchAttributes: temporal.NewSearchAttributes(
				customerKey.ValueSet(customer), amountKey.ValueSet(amount), tagsKey.ValueSet(tags), dueKey.ValueSet(due)),
			Summary:       "charge " + customer,
			StaticDetails: "details of " + id,
		}, "charge")
		require.NoError(t, err)
		return h
	}
	start("order-1", "c-1", 250, "vip", "eu")
	start("order-2", "c-1", 5, "eu")
	third := start("order-3", "c-2", 900)
	require.NoError(t, third.Terminate(ctx, client.TerminateActivityOptions{Reason: "test"}))

	t.Run("Describe", func(t *testing.T) {
		d, err := c.GetActivityHandle(client.GetActivityHandleOptions{ActivityID: "order-1"}).Describe(ctx, client.DescribeActivityOptions{})
		require.NoError(t, err)
		sa := d.TypedSearchAttributes
		got, ok := sa.GetKeyword(customerKey)
		require.True(t, ok)
		require.Equal(t, "c-1", got)
		amount, ok := sa.GetInt64(amountKey)
		require.True(t, ok)
		require.Equal(t, int64(250), amount)
		tags, ok := sa.GetKeywordList(tagsKey)
		require.True(t, ok)
		require.Equal(t, []string{"vip", "eu"}, tags)
		dueAt, ok := sa.GetTime(dueKey)
		require.True(t, ok)
		require.True(t, due.Equal(dueAt))
		summary, err := d.GetSummary()
		require.NoError(t, err)
		require.Equal(t, "charge c-1", summary)
		details, err := d.GetStaticDetails()
		require.NoError(t, err)
		require.Equal(t, "details of order-1", details)
	})

	list := func(t *testing.T, q string) []string {
		t.Helper()
		res, err := c.ListActivities(ctx, client.ListActivitiesOptions{Query: q})
		require.NoError(t, err, q)
		var ids []string
		for info, err := range res.Results {
			require.NoError(t, err, q)
			ids = append(ids, info.ActivityID)
			customer, ok := info.TypedSearchAttributes.GetKeyword(customerKey)
			require.True(t, ok, "List returns the search attributes")
			require.NotEmpty(t, customer)
		}
		return ids
	}
	t.Run("ListByQuery", func(t *testing.T) {
		require.ElementsMatch(t, []string{"order-1", "order-2"}, list(t, `CustomerId = "c-1"`))
		require.Equal(t, []string{"order-1"}, list(t, `CustomerId = "c-1" AND Amount > 10`))
		require.Equal(t, []string{"order-1"}, list(t, `Tags = "vip"`))
		require.ElementsMatch(t, []string{"order-1", "order-3"}, list(t, `Amount BETWEEN 100 AND 1000 OR Tags IN ("vip")`))
		require.Equal(t, []string{"order-3", "order-1", "order-2"}, list(t, `ORDER BY Amount DESC`))
		require.Equal(t, []string{"order-2", "order-1"}, list(t, `ExecutionStatus = "Running" AND DueAt < "2026-04-01T00:00:00Z" ORDER BY Amount`))
		require.Empty(t, list(t, `CustomerId STARTS_WITH "x"`))
	})

	t.Run("CountGroupedByStatus", func(t *testing.T) {
		res, err := c.CountActivities(ctx, client.CountActivitiesOptions{Query: `Amount > 1 GROUP BY ExecutionStatus`})
		require.NoError(t, err)
		require.Equal(t, int64(3), res.Count)
		groups := map[any]int64{}
		for _, g := range res.Groups {
			require.Len(t, g.GroupValues, 1)
			groups[g.GroupValues[0]] = g.Count
		}
		require.Equal(t, map[any]int64{"Running": 2, "Terminated": 1}, groups)
	})

	t.Run("Refused", func(t *testing.T) {
		for name, opts := range map[string]client.StartActivityOptions{
			"Unregistered": {TypedSearchAttributes: temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyKeyword("Nope").ValueSet("x"))},
			"WrongType":    {TypedSearchAttributes: temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyKeyword("Amount").ValueSet("ten"))},
			"System":       {TypedSearchAttributes: temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyKeyword("TaskQueue").ValueSet("x"))},
		} {
			opts.ID, opts.TaskQueue, opts.StartToCloseTimeout = "refused-"+name, "sa-nobody-polls", time.Minute
			_, err := c.ExecuteActivity(ctx, opts, "charge")
			var invalid *serviceerror.InvalidArgument
			require.ErrorAs(t, err, &invalid, name)
		}
		for _, q := range []string{`Amount > "ten"`, `Nope = "x"`, `GROUP BY ExecutionStatus`} {
			res, err := c.ListActivities(ctx, client.ListActivitiesOptions{Query: q})
			if err == nil {
				for _, err = range res.Results {
					break
				}
			}
			var invalid *serviceerror.InvalidArgument
			require.ErrorAs(t, err, &invalid, q)
		}
	})
}

// TestSearchAttributesSharedByEveryHost registers a search attribute through one host of a
// PostgreSQL cluster and starts an activity with it through another.
func TestSearchAttributesSharedByEveryHost(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	pg := testcluster.NewPostgres(t)
	hosts := testcluster.NewHosts(t, 2, testcluster.Options{Postgres: pg, NumShards: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	one, two := dialSDK(t, hosts[0].Address()), dialSDK(t, hosts[1].Address())
	registerOrderAttributes(t, ctx, one)

	// The second host learns of it at its next namespace refresh (every 2 s).
	require.Eventually(t, func() bool {
		resp, err := two.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
		return err == nil && resp.GetCustomAttributes()["Amount"] == enumspb.INDEXED_VALUE_TYPE_INT
	}, 30*time.Second, 20*time.Millisecond)
	_, err := two.ExecuteActivity(ctx, client.StartActivityOptions{
		ID: "shared-1", TaskQueue: "sa-nobody-polls", StartToCloseTimeout: time.Hour,
		TypedSearchAttributes: temporal.NewSearchAttributes(amountKey.ValueSet(7)),
	}, "charge")
	require.NoError(t, err)
	res, err := one.CountActivities(ctx, client.CountActivitiesOptions{Query: `Amount = 7`})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Count)
}
