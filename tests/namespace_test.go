package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigilhq/vigil/tests/testcluster"
)

// TestNamespacesSharedByEveryHost registers a namespace through one host of a PostgreSQL
// cluster and uses it at once through another, updates it through a third, and finds it on a
// host that starts later.
func TestNamespacesSharedByEveryHost(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	pg := testcluster.NewPostgres(t)
	hosts := testcluster.NewHosts(t, 3, testcluster.Options{Postgres: pg, NumShards: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	service := func(h *testcluster.Cluster) workflowservice.WorkflowServiceClient {
		conn, err := grpc.NewClient(h.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return workflowservice.NewWorkflowServiceClient(conn)
	}
	one, two, three := service(hosts[0]), service(hosts[1]), service(hosts[2])

	_, err := one.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: "payments", Description: "money"})
	require.NoError(t, err)

	// Another host serves it at once: an SDK client of the namespace starts an activity there.
	c, err := client.Dial(client.Options{HostPort: hosts[1].Address(), Namespace: "payments", Logger: quietLogger{}})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.ExecuteActivity(ctx, client.StartActivityOptions{ID: "pay-1", TaskQueue: "q", StartToCloseTimeout: time.Minute}, "charge")
	require.NoError(t, err)
	_, err = two.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: "payments"})
	require.Error(t, err, "one namespace of that name in the cluster")

	_, err = three.UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
		Namespace: "payments", UpdateInfo: &namespacepb.UpdateNamespaceInfo{OwnerEmail: "pay@example.com"}})
	require.NoError(t, err)
	for _, svc := range []workflowservice.WorkflowServiceClient{one, two, three} {
		require.Eventually(t, func() bool {
			resp, err := svc.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "payments"})
			return err == nil && resp.GetNamespaceInfo().GetOwnerEmail() == "pay@example.com" &&
				resp.GetNamespaceInfo().GetDescription() == "money"
		}, 30*time.Second, 20*time.Millisecond, "every host sees the update")
	}

	// A host that starts later knows it from the database.
	restarted := testcluster.New(t, testcluster.Options{Postgres: pg, NumShards: 8, HostID: "host-4"})
	resp, err := service(restarted).ListNamespaces(ctx, &workflowservice.ListNamespacesRequest{})
	require.NoError(t, err)
	var names []string
	for _, ns := range resp.GetNamespaces() {
		names = append(names, ns.GetNamespaceInfo().GetName())
	}
	require.Contains(t, names, "payments")
}
