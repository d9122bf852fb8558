package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/tests/testcluster"
)

// TestDeleteNamespaceResumesAfterARestart deletes a namespace that holds an activity, with a
// delay before its data is removed, and crashes the server before the removal: the server that
// restarts on the same database removes the activity and then the namespace, so that a new
// namespace of the same name starts empty.
func TestDeleteNamespaceResumesAfterARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("functional test")
	}
	t.Parallel()
	first := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := func(address string) (workflowservice.WorkflowServiceClient, operatorservice.OperatorServiceClient) {
		conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return workflowservice.NewWorkflowServiceClient(conn), operatorservice.NewOperatorServiceClient(conn)
	}
	wf, op := dial(first.Address())
	_, err := wf.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: "doomed"})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: first.Address(), Namespace: "doomed", Logger: quietLogger{}})
	require.NoError(t, err)
	_, err = c.ExecuteActivity(ctx, client.StartActivityOptions{ID: "left-behind", TaskQueue: "nobody-polls", StartToCloseTimeout: time.Hour}, "noop")
	require.NoError(t, err)
	c.Close()

	resp, err := op.DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: "doomed", NamespaceDeleteDelay: durationpb.New(2 * time.Second)})
	require.NoError(t, err)
	deleted := resp.GetDeletedNamespace()
	require.Regexp(t, `^doomed-deleted-[0-9a-f]{5}$`, deleted)
	desc, err := wf.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: deleted})
	require.NoError(t, err)
	require.Equal(t, enumspb.NAMESPACE_STATE_DELETED, desc.GetNamespaceInfo().GetState())
	list, err := wf.ListNamespaces(ctx, &workflowservice.ListNamespacesRequest{NamespaceFilter: &namespacepb.NamespaceFilter{IncludeDeleted: true}})
	require.NoError(t, err)
	require.Contains(t, namespaceNames(list), deleted)
	list, err = wf.ListNamespaces(ctx, &workflowservice.ListNamespacesRequest{})
	require.NoError(t, err)
	require.NotContains(t, namespaceNames(list), deleted)
	first.Crash() // before the delay has passed: nothing was removed yet

	second := testcluster.New(t, testcluster.Options{Path: first.Path()})
	wf, _ = dial(second.Address())
	require.Eventually(t, func() bool {
		_, err := wf.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: deleted})
		var notFound *serviceerror.NamespaceNotFound
		return errors.As(serviceerror.FromStatus(status.Convert(err)), &notFound)
	}, 90*time.Second, 100*time.Millisecond, "the restarted server finishes the removal")

	_, err = wf.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: "doomed"})
	require.NoError(t, err)
	again, err := wf.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "doomed"})
	require.NoError(t, err)
	require.Equal(t, desc.GetNamespaceInfo().GetId(), again.GetNamespaceInfo().GetId(), "the same derived ID, free again")
	_, err = wf.DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{Namespace: "doomed", ActivityId: "left-behind"})
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, serviceerror.FromStatus(status.Convert(err)), &notFound, "the deleted namespace's activity is gone")
}

func namespaceNames(resp *workflowservice.ListNamespacesResponse) []string {
	var out []string
	for _, ns := range resp.GetNamespaces() {
		out = append(out, ns.GetNamespaceInfo().GetName())
	}
	return out
}
