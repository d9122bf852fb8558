package frontend

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

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

	t.Run("WithoutAStoreRegisterIsRefusedWithTheReason", func(t *testing.T) {
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

func TestNamespaceAPIWithAStore(t *testing.T) {
	t.Parallel()
	store := namespace.NewMemoryStore()
	env := startServer(t, func(env *testEnv) {
		r, err := namespace.NewStoredRegistry(nil, store, namespace.StoreOptions{})
		require.NoError(t, err)
		require.NoError(t, r.Start(context.Background()))
		t.Cleanup(r.Stop)
		env.deps.Namespaces = r
		env.workflow = NewWorkflowHandler(env.deps)
	})
	ctx := context.Background()

	_, err := env.workflow.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: "payments", Description: "money", OwnerEmail: "pay@example.com",
		WorkflowExecutionRetentionPeriod: durationpb.New(72 * time.Hour), Data: map[string]string{"team": "pay"},
	})
	require.NoError(t, err)
	_, err = env.workflow.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: "payments"})
	require.Equal(t, codes.AlreadyExists, status.Code(err), "%v", err)
	_, err = env.workflow.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: "global", IsGlobalNamespace: true})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	_, err = env.workflow.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: "bad/name"})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)

	resp, err := env.workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "payments"})
	require.NoError(t, err)
	require.Equal(t, namespace.DeriveID("payments"), resp.GetNamespaceInfo().GetId())
	require.Equal(t, "money", resp.GetNamespaceInfo().GetDescription())
	require.Equal(t, "pay@example.com", resp.GetNamespaceInfo().GetOwnerEmail())
	require.Equal(t, map[string]string{"team": "pay"}, resp.GetNamespaceInfo().GetData())
	require.Equal(t, 72*time.Hour, resp.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration())
	require.NotNil(t, resp.GetReplicationConfig())

	list, err := env.workflow.ListNamespaces(ctx, &workflowservice.ListNamespacesRequest{})
	require.NoError(t, err)
	var names []string
	for _, ns := range list.GetNamespaces() {
		names = append(names, ns.GetNamespaceInfo().GetName())
	}
	require.Equal(t, []string{"default", "payments"}, names)

	updated, err := env.workflow.UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
		Namespace: "payments",
		UpdateInfo: &namespacepb.UpdateNamespaceInfo{
			Description: "money, moved", Data: map[string]string{"tier": "1"},
		},
		Config: &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(24 * time.Hour)},
	})
	require.NoError(t, err)
	require.Equal(t, "money, moved", updated.GetNamespaceInfo().GetDescription())
	require.Equal(t, "pay@example.com", updated.GetNamespaceInfo().GetOwnerEmail(), "what the update leaves empty is kept")
	require.Equal(t, map[string]string{"team": "pay", "tier": "1"}, updated.GetNamespaceInfo().GetData(), "data merged")
	require.Equal(t, 24*time.Hour, updated.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration())
	_, err = env.workflow.UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{Namespace: "nope"})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
}
