package history

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/common/metrics"
)

// relayMembership is a movableMembership that also names a relay.
type relayMembership struct {
	movableMembership
	via string
}

func (m *relayMembership) RelayFor(address string) (string, bool) { return m.via, m.via != "" }

// blackHole accepts connections and never answers a byte: a path whose packets are dropped.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// relayCluster is an owner that renews and answers, a third host that relays, and a router
// whose own path to the owner goes to cut (a black hole, or a closed port).
type relayCluster struct {
	owner  *countingOwner
	client healthpb.HealthClient
	router *Router
	scope  tally.Scope
}

func newRelayCluster(t *testing.T, cut string, withRelay bool) *relayCluster {
	t.Helper()
	c := &relayCluster{owner: &countingOwner{Server: health.NewServer()}, scope: tally.NewTestScope("", nil)}
	ownerAddr := startHealthHost(t, c.owner).Address()
	// The relay host knows the owner as a member and reaches it directly.
	relayMembers := membership.NewStatic(membership.Host{ID: "relay", HistoryAddress: "relay"},
		membership.Host{ID: "owner", HistoryAddress: ownerAddr})
	relayRouter := NewRouter(4, NewMonitorMembership(4, relayMembers))
	t.Cleanup(func() { _ = relayRouter.Close() })
	relayAddr := startHealthHost(t, health.NewServer(), WithRelay(relayRouter)).Address()

	m := &relayMembership{movableMembership: movableMembership{owner: ownerAddr, lapsing: map[string]bool{}}}
	if withRelay {
		m.via = relayAddr
	}
	c.router = NewRouter(4, m, WithMetricsScope(c.scope))
	c.router.dial = func(address string) string {
		if address == ownerAddr {
			return cut
		}
		return address
	}
	t.Cleanup(func() { _ = c.router.Close() })
	conn, err := c.router.ConnForShard(1)
	require.NoError(t, err)
	c.client = healthpb.NewHealthClient(conn)
	return c
}

func (c *relayCluster) check(timeout time.Duration, resendable bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var opts []grpc.CallOption
	if resendable {
		opts = append(opts, chasm.Resendable)
	}
	_, err := c.client.Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
	if err == nil && ctx.Err() != nil {
		return errors.New("answered only after the caller's deadline")
	}
	return err
}

// A resendable call whose owner renews but cannot be reached from this host (the history port
// between the two black-holed) is answered by the owner through a third host, within the
// caller's deadline, and the owner serves it once.
func TestRelayThroughAThirdHostPastABlackHole(t *testing.T) {
	c := newRelayCluster(t, blackHole(t), true)
	require.NoError(t, c.check(10*time.Second, true))
	require.Equal(t, int32(1), c.owner.served.Load())
	require.Equal(t, int64(1), relayedCount(c.scope), "the relayed call is counted")
}

// A resendable call whose owner's port refuses this host is relayed at once.
func TestRelayThroughAThirdHostPastARefusal(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	c := newRelayCluster(t, closed, true)
	require.NoError(t, c.check(10*time.Second, true))
	require.Equal(t, int32(1), c.owner.served.Load())
}

// A call that is not safe to send twice is never relayed: its first delivery may have
// committed. It waits on the direct path, within its deadline.
func TestRelayNeverSendsAnUnsafeCall(t *testing.T) {
	c := newRelayCluster(t, blackHole(t), true)
	require.Error(t, c.check(hopBudget+time.Second, false))
	require.Zero(t, c.owner.served.Load())
	require.Zero(t, relayedCount(c.scope))
}

// A relay refuses to forward to a host that is not a live member of its view: a history port
// is no open proxy.
func TestRelayRefusesANonMember(t *testing.T) {
	relayRouter := NewRouter(4, NewMonitorMembership(4, membership.NewStatic(membership.Host{ID: "relay", HistoryAddress: "relay"})))
	t.Cleanup(func() { _ = relayRouter.Close() })
	relayAddr := startHealthHost(t, health.NewServer(), WithRelay(relayRouter)).Address()
	other := startHealthHost(t, health.NewServer()).Address()
	r := NewRouter(4, StaticMembership{Address: other})
	t.Cleanup(func() { _ = r.Close() })
	_, err := r.relay(context.Background(), relayAddr, other, "/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	require.ErrorContains(t, err, "not a live member")
}

// relayedCount is what scope counted in HistoryRequestsRelayed, every outcome together.
func relayedCount(scope tally.Scope) int64 {
	var total int64
	for _, c := range scope.(tally.TestScope).Snapshot().Counters() {
		if c.Name() == metrics.HistoryRequestsRelayed.Name() {
			total += c.Value()
		}
	}
	return total
}
