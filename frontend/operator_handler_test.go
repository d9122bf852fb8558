package frontend

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/frontend/namespace"
)

func storedRegistry(t *testing.T, store namespace.Store, ts clock.TimeSource) *namespace.Registry {
	t.Helper()
	r, err := namespace.NewStoredRegistry([]namespace.Config{{Name: testNamespace}}, store, namespace.StoreOptions{TimeSource: ts})
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(r.Stop)
	return r
}

func TestOperatorSearchAttributes(t *testing.T) {
	t.Parallel()
	store := namespace.NewMemoryStore()
	ts := clock.NewFakeTimeSource()
	env := startServer(t, func(env *testEnv) {
		env.deps.Namespaces = storedRegistry(t, store, ts)
		env.workflow = NewWorkflowHandler(env.deps)
	})
	op := operatorservice.NewOperatorServiceClient(env.conn)
	ctx := context.Background()
	list := func(t *testing.T, op operatorservice.OperatorServiceClient) map[string]enumspb.IndexedValueType {
		t.Helper()
		resp, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: testNamespace})
		require.NoError(t, err)
		require.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, resp.GetSystemAttributes()["ActivityId"])
		require.Equal(t, enumspb.INDEXED_VALUE_TYPE_DATETIME, resp.GetSystemAttributes()["CloseTime"])
		return resp.GetCustomAttributes()
	}
	require.Empty(t, list(t, op))

	all := map[string]enumspb.IndexedValueType{
		"CustomerId": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		"Notes":      enumspb.INDEXED_VALUE_TYPE_TEXT,
		"Amount":     enumspb.INDEXED_VALUE_TYPE_INT,
		"Ratio":      enumspb.INDEXED_VALUE_TYPE_DOUBLE,
		"Urgent":     enumspb.INDEXED_VALUE_TYPE_BOOL,
		"DueAt":      enumspb.INDEXED_VALUE_TYPE_DATETIME,
		"Tags":       enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	}
	_, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: testNamespace, SearchAttributes: all})
	require.NoError(t, err)
	require.Equal(t, all, list(t, op))

	t.Run("RefusedWithTemporalsCodes", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			attrs map[string]enumspb.IndexedValueType
			code  codes.Code
		}{
			{"OtherType", map[string]enumspb.IndexedValueType{"Amount": enumspb.INDEXED_VALUE_TYPE_KEYWORD}, codes.AlreadyExists},
			{"OtherCase", map[string]enumspb.IndexedValueType{"amount": enumspb.INDEXED_VALUE_TYPE_INT}, codes.AlreadyExists},
			{"System", map[string]enumspb.IndexedValueType{"ActivityId": enumspb.INDEXED_VALUE_TYPE_KEYWORD}, codes.InvalidArgument},
			{"SystemOtherCase", map[string]enumspb.IndexedValueType{"taskqueue": enumspb.INDEXED_VALUE_TYPE_KEYWORD}, codes.InvalidArgument},
			{"WorkflowSystem", map[string]enumspb.IndexedValueType{"WorkflowId": enumspb.INDEXED_VALUE_TYPE_KEYWORD}, codes.InvalidArgument},
			{"TemporalPrefix", map[string]enumspb.IndexedValueType{"TemporalThing": enumspb.INDEXED_VALUE_TYPE_KEYWORD}, codes.InvalidArgument},
			{"Unspecified", map[string]enumspb.IndexedValueType{"Fresh": enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED}, codes.InvalidArgument},
			{"UnknownType", map[string]enumspb.IndexedValueType{"Fresh": 42}, codes.InvalidArgument},
			{"NotAnIdentifier", map[string]enumspb.IndexedValueType{"has space": enumspb.INDEXED_VALUE_TYPE_KEYWORD}, codes.InvalidArgument},
			{"LeadingDigit", map[string]enumspb.IndexedValueType{"1st": enumspb.INDEXED_VALUE_TYPE_KEYWORD}, codes.InvalidArgument},
			{"CaseTwins", map[string]enumspb.IndexedValueType{"Twin": enumspb.INDEXED_VALUE_TYPE_INT, "twin": enumspb.INDEXED_VALUE_TYPE_INT}, codes.InvalidArgument},
			{"Empty", nil, codes.InvalidArgument},
		} {
			t.Run(tc.name, func(t *testing.T) {
				// A good attribute rides along: nothing is applied when one is refused.
				attrs := map[string]enumspb.IndexedValueType{"Fine": enumspb.INDEXED_VALUE_TYPE_INT}
				if tc.attrs == nil {
					attrs = nil
				}
				for k, v := range tc.attrs {
					attrs[k] = v
				}
				_, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: testNamespace, SearchAttributes: attrs})
				require.Equal(t, tc.code, status.Code(err), "%v", err)
				require.Equal(t, all, list(t, op))
			})
		}
		_, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: "nope",
			SearchAttributes: map[string]enumspb.IndexedValueType{"Fine": enumspb.INDEXED_VALUE_TYPE_INT}})
		require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
		_, err = op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	})

	t.Run("AddingAgainWithTheSameTypeIsFine", func(t *testing.T) {
		_, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: testNamespace,
			SearchAttributes: map[string]enumspb.IndexedValueType{"Amount": enumspb.INDEXED_VALUE_TYPE_INT}})
		require.NoError(t, err)
		require.Equal(t, all, list(t, op))
	})

	t.Run("AnotherHostSeesThem", func(t *testing.T) {
		other := storedRegistry(t, store, ts)
		ns, err := other.GetByName(testNamespace)
		require.NoError(t, err)
		require.Equal(t, all, ns.SearchAttributes)

		// A change made through the first host reaches the second at its next refresh.
		_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: testNamespace,
			SearchAttributes: map[string]enumspb.IndexedValueType{"Region": enumspb.INDEXED_VALUE_TYPE_KEYWORD}})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			ts.Advance(namespace.RefreshIntervalDefault)
			ns, err := other.GetByName(testNamespace)
			return err == nil && ns.SearchAttributes["Region"] == enumspb.INDEXED_VALUE_TYPE_KEYWORD
		}, 10*time.Second, 10*time.Millisecond)
	})

	t.Run("Remove", func(t *testing.T) {
		_, err := op.RemoveSearchAttributes(ctx, &operatorservice.RemoveSearchAttributesRequest{Namespace: testNamespace,
			SearchAttributes: []string{"Region", "Unknown"}})
		require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
		require.Contains(t, list(t, op), "Region", "nothing is removed when one name is unknown")
		_, err = op.RemoveSearchAttributes(ctx, &operatorservice.RemoveSearchAttributesRequest{Namespace: testNamespace,
			SearchAttributes: []string{"ExecutionStatus"}})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)

		_, err = op.RemoveSearchAttributes(ctx, &operatorservice.RemoveSearchAttributesRequest{Namespace: testNamespace,
			SearchAttributes: []string{"Region", "Tags"}})
		require.NoError(t, err)
		got := list(t, op)
		require.NotContains(t, got, "Region")
		require.NotContains(t, got, "Tags")
		require.Contains(t, got, "Amount")

		// A removed name can come back with another type.
		_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: testNamespace,
			SearchAttributes: map[string]enumspb.IndexedValueType{"Tags": enumspb.INDEXED_VALUE_TYPE_KEYWORD}})
		require.NoError(t, err)
		require.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, list(t, op)["Tags"])
	})

	t.Run("OtherMethodsSayWhy", func(t *testing.T) {
		_, err := op.ListClusters(ctx, &operatorservice.ListClustersRequest{})
		require.Equal(t, codes.Unimplemented, status.Code(err))
		require.Contains(t, err.Error(), "one cluster")
		_, err = op.ListNexusEndpoints(ctx, &operatorservice.ListNexusEndpointsRequest{})
		require.Equal(t, codes.Unimplemented, status.Code(err))
		require.Contains(t, err.Error(), "Nexus")
	})
}

func TestOperatorSearchAttributesWithoutAStore(t *testing.T) {
	t.Parallel()
	env := startServer(t, nil)
	op := operatorservice.NewOperatorServiceClient(env.conn)
	_, err := op.AddSearchAttributes(context.Background(), &operatorservice.AddSearchAttributesRequest{Namespace: testNamespace,
		SearchAttributes: map[string]enumspb.IndexedValueType{"Fine": enumspb.INDEXED_VALUE_TYPE_INT}})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	resp, err := op.ListSearchAttributes(context.Background(), &operatorservice.ListSearchAttributesRequest{Namespace: testNamespace})
	require.NoError(t, err)
	require.Empty(t, resp.GetCustomAttributes())
	require.NotEmpty(t, resp.GetSystemAttributes())
}
