package frontend

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/frontend/namespace"
)

func TestNamespaceAPI(t *testing.T) {
	t.Parallel()
	env := startServer(t, func(env *testEnv) {
		env.deps.Namespaces = namespace.MustNewRegistry(
			namespace.Config{Name: testNamespace, Description: "test", OwnerEmail: "ops@example.com"},
			namespace.Config{Name: "billing"}, namespace.Config{Name: "search"})
		env.workflow = NewWorkflowHandler(env.deps)
	})
	ctx := context.Background()

	t.Run("DescribeIsCompleteAsTheCLIReadsIt", func(t *testing.T) {
		resp, err := env.workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: testNamespace})
		require.NoError(t, err)
		require.Equal(t, testNamespace, resp.GetNamespaceInfo().GetName())
		require.Equal(t, namespace.DeriveID(testNamespace), resp.GetNamespaceInfo().GetId())
		require.Equal(t, "ops@example.com", resp.GetNamespaceInfo().GetOwnerEmail())
		require.Equal(t, enumspb.NAMESPACE_STATE_REGISTERED, resp.GetNamespaceInfo().GetState())
		// The temporal CLI dereferences these without nil checks.
		require.NotNil(t, resp.ReplicationConfig)
		require.Equal(t, ClusterName, resp.ReplicationConfig.ActiveClusterName)
		require.Len(t, resp.ReplicationConfig.Clusters, 1)
		require.Equal(t, ClusterName, resp.ReplicationConfig.Clusters[0].ClusterName)
		require.NotNil(t, resp.Config)
		require.NotNil(t, resp.Config.BadBinaries)
		require.Equal(t, enumspb.ARCHIVAL_STATE_DISABLED, resp.Config.HistoryArchivalState)
		require.True(t, resp.GetNamespaceInfo().GetCapabilities().GetWorkerHeartbeats())

		byID, err := env.workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Id: namespace.DeriveID("billing")})
		require.NoError(t, err)
		require.Equal(t, "billing", byID.GetNamespaceInfo().GetName())
	})

	t.Run("ListPagesThroughEveryNamespace", func(t *testing.T) {
		var names []string
		var token []byte
		pages := 0
		for {
			resp, err := env.workflow.ListNamespaces(ctx, &workflowservice.ListNamespacesRequest{PageSize: 2, NextPageToken: token})
			require.NoError(t, err)
			pages++
			require.LessOrEqual(t, len(resp.GetNamespaces()), 2)
			for _, ns := range resp.GetNamespaces() {
				names = append(names, ns.GetNamespaceInfo().GetName())
				require.Equal(t, ClusterName, ns.GetReplicationConfig().GetActiveClusterName())
			}
			token = resp.GetNextPageToken()
			if len(token) == 0 {
				break
			}
		}
		require.Equal(t, []string{"billing", "default", testNamespace, "search"}, names)
		require.Equal(t, 2, pages)

		all, err := env.workflow.ListNamespaces(ctx, &workflowservice.ListNamespacesRequest{})
		require.NoError(t, err)
		require.Len(t, all.GetNamespaces(), 4)
		require.Empty(t, all.GetNextPageToken())
	})

	t.Run("RegisterIsRefusedWithTheReason", func(t *testing.T) {
		_, err := env.workflow.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: testNamespace})
		require.Equal(t, codes.AlreadyExists, status.Code(err), "%v", err)

		_, err = env.workflow.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: "fresh"})
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), "server configuration")
		_, err = env.workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "fresh"})
		require.Equal(t, codes.NotFound, status.Code(err), "nothing half-created: %v", err)

		_, err = env.workflow.UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{Namespace: testNamespace})
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
		_, err = env.workflow.UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{Namespace: "nope"})
		require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	})
}
