package frontend

import (
	"context"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/chasm/worker/watch"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/overload"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/frontend/namespace"
)

// ServerVersion is reported by GetSystemInfo. Release builds set it with
// -ldflags "-X github.com/vigilhq/vigil/frontend.ServerVersion=v1.2.3".
var ServerVersion = "dev"

// Deps are what the frontend's handlers and interceptors share. Only History is required;
// every other zero field gets a default (see withDefaults).
type Deps struct {
	// History reaches the history hosts. Required.
	History HistoryClient
	// Matching holds the activity task queues and worker control queues (*matching.Matcher).
	// Without it no activity task or worker command is ever delivered: PollActivityTaskQueue
	// and PollNexusTaskQueue are empty long polls, as before matching existed. Production
	// servers must set it.
	Matching Matching
	// Namespaces resolves namespace names; default: a registry with only "default".
	Namespaces *namespace.Registry
	// DynamicConfig holds rate limits and lease bounds; default: every setting at its default.
	DynamicConfig *dynamicconfig.Collection
	// TimeSource is read by rate limiters and long polls; default: the system clock.
	TimeSource clock.TimeSource
	// Logger; default: discard.
	Logger *zap.Logger
	// Auth authenticates and authorizes every call before any handler runs; nil: auth is
	// off and every caller may do everything.
	Auth *auth.Interceptor
	// TaskTokens signs the activity task tokens handed to workers and verifies those they send
	// back; nil: tokens are not signed (unit tests).
	TaskTokens *auth.TaskTokenSigner
	// TaskTokenKeys rotates the signing key (AdminService.RotateTaskTokenKey); nil: refused.
	TaskTokenKeys interface {
		RotateTaskTokenKey(ctx context.Context) (version int32, err error)
	}
	// APIKeys serves the AdminService's API key RPCs; nil: AdminService is not served.
	APIKeys auth.APIKeyStore
	// Watch is this host's live-view hub (WatchWorkers, the web page); nil: WatchWorkers is
	// Unimplemented.
	Watch *watch.Hub
	// MetricsScope receives rpc_requests/rpc_errors/rpc_latency; default: discard.
	MetricsScope tally.Scope
	// Cluster describes the vigil hosts for DescribeCluster; nil: Unimplemented.
	Cluster ClusterDescriber
	// Pressure is this host's overload controller: while history is behind, the server refuses a
	// share of heartbeats before reading them (EarlyRefusal). nil: no early refusal.
	Pressure overload.Pressure
}

// ClusterDescriber lists the vigil hosts of the cluster (history.Engine, adapted by the server).
type ClusterDescriber interface {
	DescribeCluster(ctx context.Context) (*livenesspb.DescribeClusterResponse, error)
}

func (d Deps) withDefaults() Deps {
	if d.History == nil {
		panic("frontend: Deps.History is required")
	}
	if d.Namespaces == nil {
		d.Namespaces = namespace.MustNewRegistry()
	}
	if d.DynamicConfig == nil {
		d.DynamicConfig = dynamicconfig.NewNoopCollection()
	}
	if d.TimeSource == nil {
		d.TimeSource = clock.NewRealTimeSource()
	}
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.MetricsScope == nil {
		d.MetricsScope = tally.NoopScope
	}
	return d
}
