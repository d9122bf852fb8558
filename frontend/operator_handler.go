package frontend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/frontend/searchattr"
)

// OperatorHandler serves Temporal's OperatorService on the WorkflowService's port: the search
// attributes of a namespace. Custom search attributes are kept in the namespace's stored
// record, so every host of a cluster sees them as it sees the namespace (the registry re-reads
// the store every few seconds, and a host sees its own change at once), and a namespace's
// attributes go with it. The cluster, remote-cluster and Nexus endpoint methods are refused
// with the reason.
type OperatorHandler struct {
	unservedOperations
	deps Deps
}

// unservedOperations are the OperatorService methods vigil refuses, each with its reason. They
// are kept apart from OperatorHandler so that the methods it declares are those it serves.
type unservedOperations struct {
	operatorservice.UnimplementedOperatorServiceServer
}

// NewOperatorHandler returns the OperatorService handler.
func NewOperatorHandler(deps Deps) *OperatorHandler {
	return &OperatorHandler{deps: deps.withDefaults()}
}

// errNoChange ends a namespace update that would store what is stored already.
var errNoChange = errors.New("no change")

// AddSearchAttributes registers custom search attributes in a namespace, all or none. A name
// registered with the same type already is accepted again (so that setup scripts can be
// rerun); with another type it is AlreadyExists. A reserved name, an invalid name or type is
// InvalidArgument.
func (h *OperatorHandler) AddSearchAttributes(ctx context.Context, req *operatorservice.AddSearchAttributesRequest) (*operatorservice.AddSearchAttributesResponse, error) {
	if err := requireNamespace(req.GetNamespace()); err != nil {
		return nil, err
	}
	add := req.GetSearchAttributes()
	if len(add) == 0 {
		return nil, serviceerror.NewInvalidArgument("search_attributes is not set on request")
	}
	names := slices.Sorted(maps.Keys(add))
	for i, name := range names {
		if err := firstError(searchattr.ValidateName(name), searchattr.ValidateType(name, add[name])); err != nil {
			return nil, err
		}
		if i > 0 && strings.EqualFold(names[i-1], name) {
			return nil, serviceerror.NewInvalidArgumentf(
				"search attributes %s and %s differ only in case: queries read names case-insensitively", names[i-1], name)
		}
	}
	if _, err := h.deps.Namespaces.GetByName(req.GetNamespace()); err != nil {
		return nil, err
	}
	_, err := h.deps.Namespaces.Update(ctx, req.GetNamespace(), func(ns *namespace.Namespace) error {
		if ns.SearchAttributes == nil {
			ns.SearchAttributes = map[string]enumspb.IndexedValueType{}
		}
		changed := false
		for _, name := range names {
			want := add[name]
			existing, t, ok := searchattr.Lookup(ns.SearchAttributes, name)
			switch {
			case ok && existing != name:
				return serviceerror.NewAlreadyExistsf(
					"search attribute %s already exists as %s: queries read names case-insensitively", name, existing)
			case ok && t != want:
				return serviceerror.NewAlreadyExistsf("search attribute %s already exists with type %s", name, t)
			case ok:
				continue
			}
			ns.SearchAttributes[name] = want
			changed = true
		}
		if !changed {
			return errNoChange
		}
		if n := len(ns.SearchAttributes); n > searchattr.MaxCustomPerNamespace {
			return serviceerror.NewInvalidArgumentf(
				"unable to create search attributes: namespace %s would have %d custom search attributes, over the limit of %d",
				ns.Name, n, searchattr.MaxCustomPerNamespace)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		return nil, err
	}
	if err == nil {
		h.deps.Logger.Info("search attributes added", zap.String("namespace", req.GetNamespace()), zap.Strings("names", names))
	}
	return &operatorservice.AddSearchAttributesResponse{}, nil
}

// RemoveSearchAttributes unregisters custom search attributes of a namespace, all or none.
// An unknown name is NotFound; a system one InvalidArgument. Values that executions hold stay
// with them (Describe shows them) but can no longer be queried.
func (h *OperatorHandler) RemoveSearchAttributes(ctx context.Context, req *operatorservice.RemoveSearchAttributesRequest) (*operatorservice.RemoveSearchAttributesResponse, error) {
	if err := requireNamespace(req.GetNamespace()); err != nil {
		return nil, err
	}
	remove := req.GetSearchAttributes()
	if len(remove) == 0 {
		return nil, serviceerror.NewInvalidArgument("search_attributes is not set on request")
	}
	for _, name := range remove {
		if searchattr.IsReserved(name) {
			return nil, serviceerror.NewInvalidArgumentf("unable to remove non-custom search attribute: %s", name)
		}
	}
	if _, err := h.deps.Namespaces.GetByName(req.GetNamespace()); err != nil {
		return nil, err
	}
	_, err := h.deps.Namespaces.Update(ctx, req.GetNamespace(), func(ns *namespace.Namespace) error {
		for _, name := range remove {
			if _, ok := ns.SearchAttributes[name]; !ok {
				return serviceerror.NewNotFoundf("search attribute %s doesn't exist", name)
			}
			delete(ns.SearchAttributes, name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	h.deps.Logger.Info("search attributes removed", zap.String("namespace", req.GetNamespace()), zap.Strings("names", remove))
	return &operatorservice.RemoveSearchAttributesResponse{}, nil
}

// ListSearchAttributes returns the namespace's custom search attributes and the system ones
// that vigil fills (those of standalone activities). storage_schema is empty: there is no
// separate visibility store whose native types could be shown.
func (h *OperatorHandler) ListSearchAttributes(ctx context.Context, req *operatorservice.ListSearchAttributesRequest) (*operatorservice.ListSearchAttributesResponse, error) {
	if err := requireNamespace(req.GetNamespace()); err != nil {
		return nil, err
	}
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	custom := maps.Clone(ns.SearchAttributes)
	if custom == nil {
		custom = map[string]enumspb.IndexedValueType{}
	}
	return &operatorservice.ListSearchAttributesResponse{
		CustomAttributes: custom,
		SystemAttributes: searchattr.System(),
	}, nil
}

func errSingleCluster(method string) error {
	return serviceerror.NewUnimplemented(fmt.Sprintf(
		"%s is not supported: vigil runs one cluster and does not replicate namespaces to remote clusters", method))
}

// AddOrUpdateRemoteCluster is refused: vigil has no multi-cluster replication.
func (unservedOperations) AddOrUpdateRemoteCluster(context.Context, *operatorservice.AddOrUpdateRemoteClusterRequest) (*operatorservice.AddOrUpdateRemoteClusterResponse, error) {
	return nil, errSingleCluster("AddOrUpdateRemoteCluster")
}

// RemoveRemoteCluster is refused: vigil has no multi-cluster replication.
func (unservedOperations) RemoveRemoteCluster(context.Context, *operatorservice.RemoveRemoteClusterRequest) (*operatorservice.RemoveRemoteClusterResponse, error) {
	return nil, errSingleCluster("RemoveRemoteCluster")
}

// ListClusters is refused: vigil has no remote clusters (WorkerLivenessService.ListHosts
// lists the hosts of this one).
func (unservedOperations) ListClusters(context.Context, *operatorservice.ListClustersRequest) (*operatorservice.ListClustersResponse, error) {
	return nil, errSingleCluster("ListClusters")
}

func errNoNexus(method string) error {
	return serviceerror.NewUnimplemented(fmt.Sprintf(
		"%s is not supported: vigil runs no Nexus operations, so it keeps no Nexus endpoints", method))
}

// GetNexusEndpoint is refused: vigil serves no Nexus operations.
func (unservedOperations) GetNexusEndpoint(context.Context, *operatorservice.GetNexusEndpointRequest) (*operatorservice.GetNexusEndpointResponse, error) {
	return nil, errNoNexus("GetNexusEndpoint")
}

// CreateNexusEndpoint is refused: vigil serves no Nexus operations.
func (unservedOperations) CreateNexusEndpoint(context.Context, *operatorservice.CreateNexusEndpointRequest) (*operatorservice.CreateNexusEndpointResponse, error) {
	return nil, errNoNexus("CreateNexusEndpoint")
}

// UpdateNexusEndpoint is refused: vigil serves no Nexus operations.
func (unservedOperations) UpdateNexusEndpoint(context.Context, *operatorservice.UpdateNexusEndpointRequest) (*operatorservice.UpdateNexusEndpointResponse, error) {
	return nil, errNoNexus("UpdateNexusEndpoint")
}

// DeleteNexusEndpoint is refused: vigil serves no Nexus operations.
func (unservedOperations) DeleteNexusEndpoint(context.Context, *operatorservice.DeleteNexusEndpointRequest) (*operatorservice.DeleteNexusEndpointResponse, error) {
	return nil, errNoNexus("DeleteNexusEndpoint")
}

// ListNexusEndpoints is refused: vigil serves no Nexus operations.
func (unservedOperations) ListNexusEndpoints(context.Context, *operatorservice.ListNexusEndpointsRequest) (*operatorservice.ListNexusEndpointsResponse, error) {
	return nil, errNoNexus("ListNexusEndpoints")
}

func errNoSoftDelete(method string) error {
	return serviceerror.NewUnimplemented(fmt.Sprintf(
		"%s is not supported: vigil keeps no soft-deleted namespaces to restore", method))
}

// SoftDeleteNamespace is refused: vigil has no soft deletion of namespaces.
func (unservedOperations) SoftDeleteNamespace(context.Context, *operatorservice.SoftDeleteNamespaceRequest) (*operatorservice.SoftDeleteNamespaceResponse, error) {
	return nil, errNoSoftDelete("SoftDeleteNamespace")
}

// RestoreNamespace is refused: vigil has no soft deletion of namespaces.
func (unservedOperations) RestoreNamespace(context.Context, *operatorservice.RestoreNamespaceRequest) (*operatorservice.RestoreNamespaceResponse, error) {
	return nil, errNoSoftDelete("RestoreNamespace")
}

// DescribeNamespaceRestore is refused: vigil has no soft deletion of namespaces.
func (unservedOperations) DescribeNamespaceRestore(context.Context, *operatorservice.DescribeNamespaceRestoreRequest) (*operatorservice.DescribeNamespaceRestoreResponse, error) {
	return nil, errNoSoftDelete("DescribeNamespaceRestore")
}
