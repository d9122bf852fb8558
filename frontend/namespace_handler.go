package frontend

import (
	"context"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	replicationpb "go.temporal.io/api/replication/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/vigilhq/vigil/frontend/namespace"
)

// ClusterName is the name vigil gives its (single, local) cluster in namespace replication
// configs: "active", as a Temporal dev server does, so that tools which print or compare the
// active cluster see what they expect.
const ClusterName = "active"

// ListNamespacesPageSizeDefault is the page size of a ListNamespaces request that names none
// (and the cap: larger requests are clamped).
const ListNamespacesPageSizeDefault = 100

// describeNamespace is the full description of a configured namespace, as Temporal answers
// DescribeNamespace and ListNamespaces: every message the `temporal` CLI reads is present
// (it dereferences ReplicationConfig and Config without nil checks).
func (h *WorkflowHandler) describeNamespace(ns *namespace.Namespace) *workflowservice.DescribeNamespaceResponse {
	return &workflowservice.DescribeNamespaceResponse{
		NamespaceInfo: &namespacepb.NamespaceInfo{
			Name:        ns.Name,
			Id:          ns.ID,
			State:       enumspb.NAMESPACE_STATE_REGISTERED,
			Description: ns.Description,
			OwnerEmail:  ns.OwnerEmail,
			Data:        map[string]string{},
			Capabilities: &namespacepb.NamespaceInfo_Capabilities{
				WorkerHeartbeats:             true,
				WorkerCommands:               true,
				WorkerPollCompleteOnShutdown: h.pollCompleteOnShutdown,
			},
			// Zero limits: vigil enforces no blob/memo size limits beyond gRPC's.
			Limits: &namespacepb.NamespaceInfo_Limits{},
		},
		// No retention: vigil keeps no workflow histories. Archival is not supported.
		Config: &namespacepb.NamespaceConfig{
			BadBinaries:             &namespacepb.BadBinaries{Binaries: map[string]*namespacepb.BadBinaryInfo{}},
			HistoryArchivalState:    enumspb.ARCHIVAL_STATE_DISABLED,
			VisibilityArchivalState: enumspb.ARCHIVAL_STATE_DISABLED,
		},
		ReplicationConfig: &replicationpb.NamespaceReplicationConfig{
			ActiveClusterName: ClusterName,
			Clusters:          []*replicationpb.ClusterReplicationConfig{{ClusterName: ClusterName}},
			State:             enumspb.REPLICATION_STATE_NORMAL,
		},
		IsGlobalNamespace: false,
		FailoverHistory:   []*replicationpb.FailoverStatus{},
	}
}

// DescribeNamespace describes a configured namespace, with the capabilities that switch on the
// SDK's worker heartbeats and worker commands.
func (h *WorkflowHandler) DescribeNamespace(_ context.Context, req *workflowservice.DescribeNamespaceRequest) (*workflowservice.DescribeNamespaceResponse, error) {
	var ns *namespace.Namespace
	var err error
	if req.GetNamespace() != "" {
		ns, err = h.deps.Namespaces.GetByName(req.GetNamespace())
	} else {
		ns, err = h.deps.Namespaces.GetByID(req.GetId())
	}
	if err != nil {
		return nil, err
	}
	return h.describeNamespace(ns), nil
}

// ListNamespaces lists the configured namespaces by name. The page token is the name of the
// last namespace of the previous page: the list is sorted and static, so a page is what
// follows it. Every vigil namespace is REGISTERED, so the include_deleted filter changes
// nothing.
func (h *WorkflowHandler) ListNamespaces(_ context.Context, req *workflowservice.ListNamespacesRequest) (*workflowservice.ListNamespacesResponse, error) {
	size := int(req.GetPageSize())
	if size <= 0 || size > ListNamespacesPageSizeDefault {
		size = ListNamespacesPageSizeDefault
	}
	names := h.deps.Namespaces.Names()
	start := 0
	if after := string(req.GetNextPageToken()); after != "" {
		start, _ = slices.BinarySearch(names, after)
		if start < len(names) && names[start] == after {
			start++
		}
	}
	resp := &workflowservice.ListNamespacesResponse{}
	for _, name := range names[start:] {
		if len(resp.Namespaces) == size {
			resp.NextPageToken = []byte(resp.Namespaces[size-1].GetNamespaceInfo().GetName())
			break
		}
		ns, err := h.deps.Namespaces.GetByName(name)
		if err != nil {
			return nil, err
		}
		resp.Namespaces = append(resp.Namespaces, h.describeNamespace(ns))
	}
	return resp, nil
}

// RegisterNamespace answers what a Temporal server would for a namespace that exists
// (NamespaceAlreadyExists, which scripts that "create if missing" accept), and for a new one
// FailedPrecondition: vigil's namespaces are declared in the server's static configuration
// (config `namespaces:`), on every host alike, and there is no namespace store to create
// one in at run time.
func (h *WorkflowHandler) RegisterNamespace(_ context.Context, req *workflowservice.RegisterNamespaceRequest) (*workflowservice.RegisterNamespaceResponse, error) {
	if req.GetNamespace() == "" {
		return nil, serviceerror.NewInvalidArgument("namespace is required")
	}
	if _, err := h.deps.Namespaces.GetByName(req.GetNamespace()); err == nil {
		return nil, serviceerror.NewNamespaceAlreadyExists(fmt.Sprintf("namespace %q already exists", req.GetNamespace()))
	}
	return nil, serviceerror.NewFailedPrecondition(fmt.Sprintf(
		"namespace %q cannot be created at run time: vigil's namespaces are declared in the server configuration (namespaces: in the config file, or vigil server start --namespace NAME), the same on every host; add it there and restart the servers",
		req.GetNamespace()))
}

// UpdateNamespace is refused like RegisterNamespace: the configuration owns namespaces.
func (h *WorkflowHandler) UpdateNamespace(_ context.Context, req *workflowservice.UpdateNamespaceRequest) (*workflowservice.UpdateNamespaceResponse, error) {
	if _, err := h.deps.Namespaces.GetByName(req.GetNamespace()); err != nil {
		return nil, err
	}
	return nil, serviceerror.NewFailedPrecondition(fmt.Sprintf(
		"namespace %q cannot be updated at run time: vigil's namespaces are declared in the server configuration (namespaces:); change it there and restart the servers",
		req.GetNamespace()))
}
