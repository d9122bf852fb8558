package frontend

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	replicationpb "go.temporal.io/api/replication/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

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
	state := enumspb.NAMESPACE_STATE_REGISTERED
	if ns.Deleted {
		state = enumspb.NAMESPACE_STATE_DELETED
	}
	return &workflowservice.DescribeNamespaceResponse{
		NamespaceInfo: &namespacepb.NamespaceInfo{
			Name:         ns.Name,
			Id:           ns.ID,
			State:        state,
			Description:  ns.Description,
			OwnerEmail:   ns.OwnerEmail,
			Data:         dataOrEmpty(ns.Data),
			Capabilities: h.namespaceCapabilities(),
			// Zero limits: vigil enforces no blob/memo size limits beyond gRPC's.
			Limits: &namespacepb.NamespaceInfo_Limits{},
		},
		// vigil keeps no workflow histories: the retention is recorded and shown, nothing more.
		// Archival is not supported.
		Config: &namespacepb.NamespaceConfig{
			WorkflowExecutionRetentionTtl: durationpb.New(ns.Retention),
			BadBinaries:                   &namespacepb.BadBinaries{Binaries: map[string]*namespacepb.BadBinaryInfo{}},
			HistoryArchivalState:          enumspb.ARCHIVAL_STATE_DISABLED,
			VisibilityArchivalState:       enumspb.ARCHIVAL_STATE_DISABLED,
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

// namespaceCapabilities are what vigil implements of a namespace's capabilities: worker
// heartbeats and commands, completing a worker's polls at its shutdown (unless turned off), and
// standalone activities with a start delay and the operator commands (pause, unpause, reset,
// update options). Batch operations on activities are not served.
func (h *WorkflowHandler) namespaceCapabilities() *namespacepb.NamespaceInfo_Capabilities {
	return &namespacepb.NamespaceInfo_Capabilities{
		WorkerHeartbeats:                   true,
		WorkerCommands:                     true,
		WorkerPollCompleteOnShutdown:       h.pollCompleteOnShutdown,
		StandaloneActivities:               true,
		StandaloneActivityStartDelay:       true,
		StandaloneActivityOperatorCommands: true,
	}
}

func dataOrEmpty(data map[string]string) map[string]string {
	if data == nil {
		return map[string]string{}
	}
	return data
}

// DescribeNamespace describes a namespace, with the capabilities that switch on the
// SDK's worker heartbeats and worker commands. A deleted namespace whose data is still being
// removed is described, under its new name, in state DELETED.
func (h *WorkflowHandler) DescribeNamespace(_ context.Context, req *workflowservice.DescribeNamespaceRequest) (*workflowservice.DescribeNamespaceResponse, error) {
	var ns *namespace.Namespace
	var err error
	if req.GetNamespace() != "" {
		ns, err = h.deps.Namespaces.Lookup(req.GetNamespace())
	} else {
		ns, err = h.deps.Namespaces.LookupID(req.GetId())
	}
	if err != nil {
		return nil, err
	}
	return h.describeNamespace(ns), nil
}

// ListNamespaces lists the namespaces by name. The page token is the name of the last
// namespace of the previous page: the list is sorted, so a page is what follows it (a
// namespace created meanwhile shows if it sorts after the token). Deleted namespaces whose
// data is still being removed are listed only with namespace_filter.include_deleted.
func (h *WorkflowHandler) ListNamespaces(_ context.Context, req *workflowservice.ListNamespacesRequest) (*workflowservice.ListNamespacesResponse, error) {
	size := int(req.GetPageSize())
	if size <= 0 || size > ListNamespacesPageSizeDefault {
		size = ListNamespacesPageSizeDefault
	}
	names := h.deps.Namespaces.Names()
	if req.GetNamespaceFilter().GetIncludeDeleted() {
		for _, ns := range h.deps.Namespaces.Deleted() {
			names = append(names, ns.Name)
		}
		slices.Sort(names)
	}
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
		ns, err := h.deps.Namespaces.Lookup(name)
		if err != nil {
			return nil, err
		}
		resp.Namespaces = append(resp.Namespaces, h.describeNamespace(ns))
	}
	return resp, nil
}

// RegisterNamespace creates a namespace, stored for every host of the cluster and usable at
// once (on another host, as soon as it is first named there). An existing name is
// NamespaceAlreadyExists. Description, owner email, retention and data are kept; a global
// namespace, other clusters and archival are InvalidArgument (vigil is one local cluster).
func (h *WorkflowHandler) RegisterNamespace(ctx context.Context, req *workflowservice.RegisterNamespaceRequest) (*workflowservice.RegisterNamespaceResponse, error) {
	if req.GetNamespace() == "" {
		return nil, serviceerror.NewInvalidArgument("namespace is required")
	}
	if err := namespace.ValidateName(req.GetNamespace()); err != nil {
		return nil, serviceerror.NewInvalidArgument(err.Error())
	}
	if err := localNamespaceOnly(req.GetIsGlobalNamespace(), req.GetClusters(), req.GetActiveClusterName(),
		req.GetHistoryArchivalState(), req.GetVisibilityArchivalState()); err != nil {
		return nil, err
	}
	retention, err := retentionOf(req.GetWorkflowExecutionRetentionPeriod())
	if err != nil {
		return nil, err
	}
	_, err = h.deps.Namespaces.Register(ctx, namespace.Namespace{
		Name: req.GetNamespace(), Description: req.GetDescription(), OwnerEmail: req.GetOwnerEmail(),
		Retention: retention, Data: maps.Clone(req.GetData()),
	})
	if err != nil {
		return nil, err
	}
	return &workflowservice.RegisterNamespaceResponse{}, nil
}

// UpdateNamespace changes a namespace's description, owner email and data (merged key by key,
// as Temporal does) and retention; what the request leaves empty is kept. Replication and
// archival settings other than vigil's own are InvalidArgument. The answer is the namespace
// as updated.
func (h *WorkflowHandler) UpdateNamespace(ctx context.Context, req *workflowservice.UpdateNamespaceRequest) (*workflowservice.UpdateNamespaceResponse, error) {
	if req.GetNamespace() == "" {
		return nil, serviceerror.NewInvalidArgument("namespace is required")
	}
	repl := req.GetReplicationConfig()
	cfg := req.GetConfig()
	if err := localNamespaceOnly(req.GetPromoteNamespace(), repl.GetClusters(), repl.GetActiveClusterName(),
		cfg.GetHistoryArchivalState(), cfg.GetVisibilityArchivalState()); err != nil {
		return nil, err
	}
	var retention *time.Duration
	if ttl := cfg.GetWorkflowExecutionRetentionTtl(); ttl != nil {
		d, err := retentionOf(ttl)
		if err != nil {
			return nil, err
		}
		retention = &d
	}
	info := req.GetUpdateInfo()
	ns, err := h.deps.Namespaces.Update(ctx, req.GetNamespace(), func(ns *namespace.Namespace) error {
		if info.GetDescription() != "" {
			ns.Description = info.GetDescription()
		}
		if info.GetOwnerEmail() != "" {
			ns.OwnerEmail = info.GetOwnerEmail()
		}
		maps.Copy(ns.Data, info.GetData())
		if retention != nil {
			ns.Retention = *retention
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	d := h.describeNamespace(ns)
	return &workflowservice.UpdateNamespaceResponse{
		NamespaceInfo: d.NamespaceInfo, Config: d.Config, ReplicationConfig: d.ReplicationConfig,
		IsGlobalNamespace: d.IsGlobalNamespace,
	}, nil
}

// localNamespaceOnly refuses what a local namespace of a one-cluster server cannot be.
func localNamespaceOnly(global bool, clusters []*replicationpb.ClusterReplicationConfig, activeCluster string, archival ...enumspb.ArchivalState) error {
	if global {
		return serviceerror.NewInvalidArgument("vigil has no global namespaces: it is one local cluster")
	}
	for _, c := range clusters {
		if c.GetClusterName() != ClusterName {
			return serviceerror.NewInvalidArgument(fmt.Sprintf("unknown cluster %q: vigil's only cluster is %q", c.GetClusterName(), ClusterName))
		}
	}
	if activeCluster != "" && activeCluster != ClusterName {
		return serviceerror.NewInvalidArgument(fmt.Sprintf("unknown cluster %q: vigil's only cluster is %q", activeCluster, ClusterName))
	}
	for _, a := range archival {
		if a == enumspb.ARCHIVAL_STATE_ENABLED {
			return serviceerror.NewInvalidArgument("archival is not supported")
		}
	}
	return nil
}

func retentionOf(d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if d.CheckValid() != nil || d.AsDuration() < 0 {
		return 0, serviceerror.NewInvalidArgument("workflow execution retention must be a valid, non-negative duration")
	}
	return d.AsDuration(), nil
}
