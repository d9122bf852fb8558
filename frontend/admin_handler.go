package frontend

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminpb "github.com/vigilhq/vigil/api/gen/adminpb/v1"
	"github.com/vigilhq/vigil/frontend/auth"
)

// AdminHandler serves vigil's AdminService: API keys. Who may call it is the auth
// interceptor's decision (admin role); the handler keeps a namespace admin to its namespace.
type AdminHandler struct {
	adminpb.UnimplementedAdminServiceServer
	deps Deps
}

// NewAdminHandler serves deps.APIKeys, which must be set.
func NewAdminHandler(deps Deps) *AdminHandler {
	return &AdminHandler{deps: deps.withDefaults()}
}

// errAuthOff refuses key management on a server that does not check keys: a key minted by
// anyone while the server is open would still be valid once auth is turned on.
var errAuthOff = serviceerror.NewFailedPrecondition("authentication is off on this server: start it with auth enabled (--auth or auth.enabled) to manage API keys")

// CreateAPIKey implements adminpb.AdminServiceServer.
func (h *AdminHandler) CreateAPIKey(ctx context.Context, req *adminpb.CreateAPIKeyRequest) (*adminpb.CreateAPIKeyResponse, error) {
	if h.deps.Auth == nil {
		return nil, errAuthOff
	}
	if req.GetNamespace() == "" {
		return nil, serviceerror.NewInvalidArgument("namespace is required (\"*\" for every namespace)")
	}
	if req.GetNamespace() != auth.SystemNamespace {
		if _, err := h.deps.Namespaces.GetByName(req.GetNamespace()); err != nil {
			return nil, serviceerror.NewInvalidArgumentf("unknown namespace %q", req.GetNamespace())
		}
	}
	roles, err := auth.ParseRoles(req.GetRoles())
	if err != nil {
		return nil, serviceerror.NewInvalidArgument(err.Error())
	}
	if len(req.GetDescription()) > 1000 {
		return nil, serviceerror.NewInvalidArgument("description is longer than 1000 bytes")
	}
	key, id, err := auth.NewAPIKey()
	if err != nil {
		return nil, serviceerror.NewUnavailablef("create API key: %v", err)
	}
	rec := auth.APIKey{
		ID: id, Hash: auth.HashAPIKey(key), Namespace: req.GetNamespace(), Roles: roles,
		Description: req.GetDescription(), CreateTime: h.deps.TimeSource.Now().UTC(),
	}
	if err := h.deps.APIKeys.CreateAPIKey(ctx, rec); err != nil {
		return nil, serviceerror.NewUnavailablef("store API key: %v", err)
	}
	return &adminpb.CreateAPIKeyResponse{Key: key, Info: apiKeyInfo(&rec)}, nil
}

// ListAPIKeys implements adminpb.AdminServiceServer.
func (h *AdminHandler) ListAPIKeys(ctx context.Context, req *adminpb.ListAPIKeysRequest) (*adminpb.ListAPIKeysResponse, error) {
	if h.deps.Auth == nil {
		return nil, errAuthOff
	}
	keys, err := h.deps.APIKeys.ListAPIKeys(ctx, req.GetNamespace())
	if err != nil {
		return nil, serviceerror.NewUnavailablef("list API keys: %v", err)
	}
	resp := &adminpb.ListAPIKeysResponse{}
	for _, k := range keys {
		resp.Keys = append(resp.Keys, apiKeyInfo(k))
	}
	return resp, nil
}

// RevokeAPIKey implements adminpb.AdminServiceServer. A namespace admin revokes only keys of
// its namespace: the key must belong to the request's namespace (checked by the interceptor).
func (h *AdminHandler) RevokeAPIKey(ctx context.Context, req *adminpb.RevokeAPIKeyRequest) (*adminpb.RevokeAPIKeyResponse, error) {
	if h.deps.Auth == nil {
		return nil, errAuthOff
	}
	if req.GetId() == "" {
		return nil, serviceerror.NewInvalidArgument("id is required")
	}
	notFound := serviceerror.NewNotFound(fmt.Sprintf("no API key %q", req.GetId()))
	if req.GetNamespace() != "" {
		keys, err := h.deps.APIKeys.ListAPIKeys(ctx, req.GetNamespace())
		if err != nil {
			return nil, serviceerror.NewUnavailablef("list API keys: %v", err)
		}
		found := false
		for _, k := range keys {
			found = found || k.ID == req.GetId()
		}
		if !found {
			return nil, notFound
		}
	}
	err := h.deps.APIKeys.RevokeAPIKey(ctx, req.GetId(), h.deps.TimeSource.Now().UTC())
	if errors.Is(err, auth.ErrAPIKeyNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, serviceerror.NewUnavailablef("revoke API key: %v", err)
	}
	return &adminpb.RevokeAPIKeyResponse{}, nil
}

func apiKeyInfo(k *auth.APIKey) *adminpb.APIKeyInfo {
	info := &adminpb.APIKeyInfo{
		Id: k.ID, Namespace: k.Namespace, Roles: k.Roles.String(), Description: k.Description,
		CreateTime: timestamppb.New(k.CreateTime),
	}
	if !k.RevokeTime.IsZero() {
		info.RevokeTime = timestamppb.New(k.RevokeTime)
	}
	return info
}

// RotateTaskTokenKey implements adminpb.AdminServiceServer.
func (h *AdminHandler) RotateTaskTokenKey(ctx context.Context, _ *adminpb.RotateTaskTokenKeyRequest) (*adminpb.RotateTaskTokenKeyResponse, error) {
	if h.deps.Auth == nil {
		return nil, errAuthOff
	}
	if h.deps.TaskTokenKeys == nil {
		return nil, serviceerror.NewUnimplemented("task-token keys are not rotatable on this server")
	}
	version, err := h.deps.TaskTokenKeys.RotateTaskTokenKey(ctx)
	if err != nil {
		return nil, serviceerror.NewUnavailablef("rotate task-token key: %v", err)
	}
	return &adminpb.RotateTaskTokenKeyResponse{Version: version}, nil
}
