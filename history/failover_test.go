package history

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/membership"
)

// stuckOwner is a history host that receives calls and never answers them (its store froze):
// each call waits until its caller gives up, or until release.
type stuckOwner struct {
	*health.Server
	received atomic.Int32
	canceled atomic.Int32
	release  chan struct{}
}

func newStuckOwner() *stuckOwner {
	return &stuckOwner{Server: health.NewServer(), release: make(chan struct{})}
}

func (s *stuckOwner) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	s.received.Add(1)
	select {
	case <-ctx.Done():
		s.canceled.Add(1)
		return nil, ctx.Err()
	case <-s.release:
		return s.Server.Check(ctx, req)
	}
}

// countingOwner answers every call at once and counts them.
type countingOwner struct {
	*health.Server
	served atomic.Int32
}

func (s *countingOwner) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	s.served.Add(1)
	return s.Server.Check(ctx, req)
}

// movableMembership names one owner for every shard and says which hosts are lapsing; the
// test moves the shards and lapses hosts.
type movableMembership struct {
	looks   atomic.Int32 // HostForShard calls
	mu      sync.Mutex
	owner   string
	lapsing map[string]bool
}

func (m *movableMembership) HostForShard(int32) (string, error) {
	m.looks.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owner, nil
}

func (m *movableMembership) Lapsing(address string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lapsing[address]
}

func (m *movableMembership) lapse(address string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lapsing[address] = true
}

func (m *movableMembership) move(to string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.owner = to
}

// failoverCluster is a stuck owner, a healthy next owner, and a router that starts with the
// stuck one as every shard's owner.
type failoverCluster struct {
	stuck      *stuckOwner
	next       *countingOwner
	stuckAddr  string
	nextAddr   string
	membership *movableMembership
	client     healthpb.HealthClient
}

func newFailoverCluster(t *testing.T) *failoverCluster {
	t.Helper()
	c := &failoverCluster{stuck: newStuckOwner(), next: &countingOwner{Server: health.NewServer()}}
	t.Cleanup(func() {
		select {
		case <-c.stuck.release:
		default:
			close(c.stuck.release)
		}
	})
	c.stuckAddr = startHealthHost(t, c.stuck).Address()
	c.nextAddr = startHealthHost(t, c.next).Address()
	c.membership = &movableMembership{owner: c.stuckAddr, lapsing: map[string]bool{}}
	r := NewRouter(4, c.membership)
	t.Cleanup(func() { _ = r.Close() })
	conn, err := r.ConnForShard(1)
	require.NoError(t, err)
	c.client = healthpb.NewHealthClient(conn)
	return c
}

// call sends one Check through the router with a timeout, in the background, and waits until
// the stuck owner received it.
func (c *failoverCluster) call(t *testing.T, timeout time.Duration, resendable bool) (done <-chan error, deadline context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	out := make(chan error, 1)
	go func() {
		var opts []grpc.CallOption
		if resendable {
			opts = append(opts, chasm.Resendable)
		}
		_, err := c.client.Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
		out <- err
	}()
	require.Eventually(t, func() bool { return c.stuck.received.Load() > 0 }, 10*time.Second, time.Millisecond,
		"the call never reached the stuck owner")
	return out, ctx
}

// A resendable call (a heartbeat) caught on an owner that stopped answering is taken back once
// the owner lapsed and its shard moved, and answered by the next owner within the caller's
// deadline; the stuck owner sees its call canceled.
func TestFailoverResendsToTheNextOwner(t *testing.T) {
	c := newFailoverCluster(t)
	done, ctx := c.call(t, 10*time.Second, true)
	c.membership.lapse(c.stuckAddr)
	c.membership.move(c.nextAddr)
	require.NoError(t, <-done, "the next owner answers the call")
	require.NoError(t, ctx.Err(), "answered within the caller's deadline")
	require.Equal(t, int32(1), c.next.served.Load())
	require.Eventually(t, func() bool { return c.stuck.canceled.Load() == 1 }, 10*time.Second, time.Millisecond,
		"the stuck owner's copy of the call is canceled")
}

// A call that is not safe to send twice (an attempt's completion) caught on an owner that
// stopped answering is answered Unavailable once the shard moved, and never sent to the next
// owner: its first delivery may have committed.
func TestFailoverDoesNotResendAnUnsafeCall(t *testing.T) {
	c := newFailoverCluster(t)
	done, ctx := c.call(t, 10*time.Second, false)
	c.membership.lapse(c.stuckAddr)
	c.membership.move(c.nextAddr)
	err := <-done
	var unavailable *serviceerror.Unavailable
	require.True(t, errors.As(err, &unavailable), "Unavailable, got %v", err)
	require.Contains(t, err.Error(), "outcome is unknown")
	require.NoError(t, ctx.Err(), "answered within the caller's deadline")
	require.Zero(t, c.next.served.Load(), "the next owner never got the call")
}

// An owner handing its shard off in a planned move still renews its membership: the call it
// holds is left to it, even past the hop budget, and its answer is the caller's.
func TestFailoverLeavesACallToAnOwnerThatRenews(t *testing.T) {
	c := newFailoverCluster(t)
	done, _ := c.call(t, 10*time.Second, true)
	looked := c.membership.looks.Load()
	c.membership.move(c.nextAddr)
	// Past the hop budget, the watcher looks at the owner every failoverPoll: let it see the
	// moved shard a few times.
	require.Eventually(t, func() bool { return c.membership.looks.Load() >= looked+3 }, 10*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the call was taken from an owner that still renews: %v", err)
	default:
	}
	close(c.stuck.release)
	require.NoError(t, <-done)
	require.Zero(t, c.next.served.Load(), "the call was not sent twice")
	require.Zero(t, c.stuck.canceled.Load())
}

// An owner that stopped renewing and whose shard has not moved yet: the caller gets a
// retryable Unavailable before its deadline, not its deadline spent.
func TestFailoverAnswersUnavailableBeforeTheDeadline(t *testing.T) {
	c := newFailoverCluster(t)
	c.membership.lapse(c.stuckAddr)
	done, ctx := c.call(t, hopBudget+2*stalledOwnerMargin, true)
	err := <-done
	var unavailable *serviceerror.Unavailable
	require.True(t, errors.As(err, &unavailable), "Unavailable, got %v", err)
	require.NoError(t, ctx.Err(), "answered before the caller's deadline")
	require.Zero(t, c.next.served.Load())
}

// An owner is lapsing when its last renewal, by the database's clock, is more than half a TTL
// older than this host's own, or when it is no longer a member; this host never is, by its
// own view (it fences itself instead).
func TestMonitorMembershipLapsing(t *testing.T) {
	renewed := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	host := func(id string, lastRenewal time.Time) membership.Host {
		return membership.Host{ID: id, HistoryAddress: id + ":7234", LastRenewal: lastRenewal, Expiry: lastRenewal.Add(3 * time.Second)}
	}
	m := NewMonitorMembership(4, membership.NewStatic(host("self", renewed),
		host("fresh", renewed.Add(-time.Second)), host("late", renewed.Add(-1600*time.Millisecond)), host("ahead", renewed.Add(time.Second))))
	require.False(t, m.Lapsing("self:7234"))
	require.False(t, m.Lapsing("fresh:7234"), "one renewal period behind is on time")
	require.False(t, m.Lapsing("ahead:7234"))
	require.True(t, m.Lapsing("late:7234"), "more than half a TTL behind missed a renewal")
	require.True(t, m.Lapsing("gone:7234"), "no longer a member")
}

// A fixed membership (one process, or hosts named in the configuration) routes every call to
// the owner of its shard without reading the members again: every heartbeat is routed.
func TestFixedMembershipRoutesWithoutCopying(t *testing.T) {
	m := NewMonitorMembership(4, membership.NewStatic(membership.Host{ID: "a", HistoryAddress: "a:7234"},
		membership.Host{ID: "b", HistoryAddress: "b:7234"}))
	owners := map[string]bool{}
	for shard := int32(1); shard <= 4; shard++ {
		addr, err := m.HostForShard(shard)
		require.NoError(t, err)
		owners[addr] = true
	}
	require.Len(t, owners, 2, "the shards are spread over both hosts")
	allocs := testing.AllocsPerRun(100, func() {
		_, err := m.HostForShard(1)
		require.NoError(t, err)
	})
	require.Zero(t, allocs)
}
