// Command temporal-peer runs a stock Temporal server (go.temporal.io/server, through its
// temporaltest package) in this process, on a fixed loopback address, so that vigil can be
// measured against the real thing on the same machine with the same load generator
// (`vigil bench --api public`). See docs/peer.md.
//
// It is a separate Go module (tools/peer/go.mod) so that the server's large dependency graph
// never enters vigil's own go.mod.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/chasm/lib/activity"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The dynamic config the peer runs with. temporaltest's own (a single key) is replaced as a
// whole by WithDynamicConfigClient, so it is repeated here. extra (--dynamic-config-value)
// is applied last and wins.
func dynamicConfig(extra map[dynamicconfig.Key]any) dynamicconfig.StaticClient {
	on := []dynamicconfig.ConstrainedValue{{Value: true}}
	dc := dynamicconfig.StaticClient{
		// temporaltest's own setting, kept.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): on,
		// frontend.WorkerHeartbeatsEnabled: accept WorkflowService.RecordWorkerHeartbeat and
		// advertise NamespaceInfo.Capabilities.worker_heartbeats (default true in v1.32.1;
		// pinned so that a different default does not silently change what is compared).
		dynamicconfig.WorkerHeartbeatsEnabled.Key(): on,
		// frontend.ListWorkersEnabled: deprecated in v1.32.1 (ListWorkers/DescribeWorker are
		// always on); harmless, and explicit.
		dynamicconfig.ListWorkersEnabled.Key(): on,
		// frontend.WorkerCommandsEnabled: server-to-worker commands (e.g. cancel a running
		// activity), as vigil has them. Default false.
		dynamicconfig.WorkerCommandsEnabled.Key(): on,
		// activity.enableStandalone (default true) on the CHASM tree (history.enableChasm,
		// default true): standalone activities, as vigil serves them.
		dynamicconfig.EnableChasm.Key(): on,
		activity.Enabled.Key():          on,
	}
	for k, v := range extra {
		dc[k] = v
	}
	return dc
}

// dcValues collects repeated --dynamic-config-value KEY=VALUE flags. VALUE is read as a
// bool, an integer, a number, or else a string (surrounding double quotes removed), so that
// matching.rps=5000, frontend.WorkerCommandsEnabled=false and x="10s" all work.
type dcValues map[dynamicconfig.Key]any

func (d dcValues) String() string { return fmt.Sprint(map[dynamicconfig.Key]any(d)) }

func (d dcValues) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	k = strings.TrimSpace(k)
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	v = strings.TrimSpace(v)
	var val any
	if b, err := strconv.ParseBool(v); err == nil {
		val = b
	} else if i, err := strconv.Atoi(v); err == nil {
		val = i
	} else if f, err := strconv.ParseFloat(v, 64); err == nil {
		val = f
	} else if u, err := strconv.Unquote(v); err == nil {
		val = u
	} else {
		val = v
	}
	d[dynamicconfig.MakeKey(k)] = val
	return nil
}

// listenOn returns a server option that moves temporaltest's frontend to ip:port.
//
// temporaltest always picks a free port itself and exposes no option for it; the lowest-level
// hook it passes through (WithBaseServerOptions) is a temporal.ServerOption. Server options
// are applied in order, after temporaltest's WithConfig, and WithAudienceGetter hands its
// function the *config.Config that temporaltest built, before anything reads it. The function
// rewrites the three places that name the frontend address and returns nil, the default
// (no JWT audience mapping), since temporaltest configures no authorization.
func listenOn(ip string, port int) temporal.ServerOption {
	return temporal.WithAudienceGetter(func(cfg *config.Config) authorization.JWTAudienceMapper {
		if cfg == nil {
			panic("temporal-peer: no server config to rewrite (temporaltest changed?)")
		}
		hostPort := net.JoinHostPort(ip, strconv.Itoa(port))
		fe := cfg.Services["frontend"]
		fe.RPC.GRPCPort = port
		fe.RPC.BindOnLocalHost = false
		fe.RPC.BindOnIP = ip
		cfg.Services["frontend"] = fe
		cfg.PublicClient.HostPort = hostPort
		if cfg.ClusterMetadata != nil {
			for name, ci := range cfg.ClusterMetadata.ClusterInformation {
				ci.RPCAddress = hostPort
				cfg.ClusterMetadata.ClusterInformation[name] = ci
			}
		}
		return nil
	})
}

func main() {
	ip := flag.String("ip", "127.0.0.1", "loopback IP the frontend listens on")
	port := flag.Int("port", 7234, "frontend gRPC port")
	namespace := flag.String("namespace", "default", "namespace to register (temporaltest also registers a random temporaltest-N one)")
	extra := dcValues{}
	flag.Var(extra, "dynamic-config-value", "`KEY=VALUE` dynamic config override, repeatable (e.g. matching.rps=10000)")
	flag.Parse()

	if parsed := net.ParseIP(*ip); parsed == nil || !parsed.IsLoopback() {
		fmt.Fprintf(os.Stderr, "temporal-peer: --ip must be a loopback address, got %q\n", *ip)
		os.Exit(2)
	}
	// Fail early and clearly if the port is taken (the server would otherwise panic deep inside).
	addr := net.JoinHostPort(*ip, strconv.Itoa(*port))
	if l, err := net.Listen("tcp", addr); err != nil {
		fmt.Fprintf(os.Stderr, "temporal-peer: cannot listen on %s: %v\n", addr, err)
		os.Exit(1)
	} else {
		_ = l.Close()
	}

	ts := temporaltest.NewServer(temporaltest.WithBaseServerOptions(
		listenOn(*ip, *port),
		temporal.WithDynamicConfigClient(dynamicConfig(extra)),
	))
	got := ts.GetFrontendHostPort()
	if got != addr {
		fmt.Fprintf(os.Stderr, "temporal-peer: frontend is on %s, not %s\n", got, addr)
	}

	if err := registerNamespace(got, *namespace); err != nil {
		fmt.Fprintf(os.Stderr, "temporal-peer: %v\n", err)
		stop(ts)
		os.Exit(1)
	}

	if len(extra) > 0 {
		fmt.Fprintf(os.Stderr, "temporal-peer: dynamic config overrides: %v\n", extra)
	}
	fmt.Printf("peer listening on %s\n", got)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s := <-sig
	fmt.Fprintf(os.Stderr, "temporal-peer: %v, stopping\n", s)
	stop(ts)
}

// registerNamespace registers ns (unless it exists) and waits until the frontend serves it,
// with worker heartbeats advertised.
func registerNamespace(hostPort, ns string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	nc, err := client.NewNamespaceClient(client.Options{HostPort: hostPort})
	if err != nil {
		return fmt.Errorf("dial %s: %w", hostPort, err)
	}
	defer nc.Close()

	err = nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        ns,
		WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %q: %w", ns, err)
	}

	// The frontend's namespace registry refreshes every few seconds; wait until a call that
	// goes through it (ListWorkers) succeeds.
	c, err := client.Dial(client.Options{HostPort: hostPort, Namespace: ns})
	if err != nil {
		return fmt.Errorf("dial %s: %w", hostPort, err)
	}
	defer c.Close()
	for {
		d, err := nc.Describe(ctx, ns)
		if err == nil && d.GetNamespaceInfo().GetState() == enumspb.NAMESPACE_STATE_REGISTERED {
			if !d.GetNamespaceInfo().GetCapabilities().GetWorkerHeartbeats() {
				return fmt.Errorf("namespace %q does not advertise worker_heartbeats", ns)
			}
			_, err = c.WorkflowService().ListWorkers(ctx, &workflowservice.ListWorkersRequest{Namespace: ns, PageSize: 1})
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %q not ready: %v", ns, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop shuts the server down. temporaltest's Stop logs a shutdown error through the
// *testing.T it was given, which is nil here, so that path would panic: recover from it.
func stop(ts *temporaltest.TestServer) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintln(os.Stderr, "temporal-peer: the server reported an error while stopping")
		}
	}()
	ts.Stop()
}
