package history

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/persistence"
)

// freezableMembers is a membership store whose clock is this process's, and which can be
// frozen: every call then waits until its context ends, as over a connection that stopped
// moving.
type freezableMembers struct {
	renewals atomic.Int32
	mu       sync.Mutex
	frozen   chan struct{} // closed while not frozen
	rows     map[string]persistence.ClusterMember
}

func newFreezableMembers() *freezableMembers {
	thawed := make(chan struct{})
	close(thawed)
	return &freezableMembers{frozen: thawed, rows: map[string]persistence.ClusterMember{}}
}

func (s *freezableMembers) freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = make(chan struct{})
}

func (s *freezableMembers) thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.frozen)
}

func (s *freezableMembers) wait(ctx context.Context) error {
	s.mu.Lock()
	frozen := s.frozen
	s.mu.Unlock()
	select {
	case <-frozen:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// expiry returns when hostID's row expires, by the store's clock.
func (s *freezableMembers) expiry(hostID string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows[hostID].Expiry
}

func (s *freezableMembers) RenewMember(ctx context.Context, m persistence.ClusterMember, ttl time.Duration) (persistence.ClusterMember, error) {
	if err := s.wait(ctx); err != nil {
		return persistence.ClusterMember{}, err
	}
	s.renewals.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	m.LastRenewal, m.Expiry = now, now.Add(ttl)
	s.rows[m.HostID] = m
	return m, nil
}

func (s *freezableMembers) ListMembers(ctx context.Context) ([]persistence.ClusterMember, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []persistence.ClusterMember
	for _, m := range s.rows {
		if m.Expiry.After(time.Now()) {
			out = append(out, m)
		}
	}
	return out, nil
}

func (s *freezableMembers) RemoveMember(context.Context, string) error { return nil }

func (s *freezableMembers) WatchMembers(ctx context.Context, _ func()) error {
	<-ctx.Done()
	return ctx.Err()
}

func (s *freezableMembers) ReleaseShard(context.Context, int32, int64, bool) error { return nil }

// A host whose store stops answering fences itself off its shards: it stops serving before
// its membership row expires (the moment any other host may take its shards), and serves
// again once a renewal gets through.
func TestSelfFenceBeforeTheMembershipExpires(t *testing.T) {
	store := newFreezableMembers()
	cfg := ClusterConfig{MembershipHeartbeat: 100 * time.Millisecond, MembershipTTL: 400 * time.Millisecond}
	m, err := NewStoreMonitor(store, cfg, membership.Host{ID: "host-1", HistoryAddress: "h1"}, zaptest.NewLogger(t), nil)
	require.NoError(t, err)
	require.NoError(t, m.Start(context.Background()))
	t.Cleanup(func() { m.Stop(context.Background(), false) })
	require.True(t, m.Serving())
	require.Len(t, m.Members(), 1)

	store.freeze()
	// Every look that finds the host serving must come before its row expires: the clock is
	// read before the look, so a look delayed by the scheduler cannot be counted late.
	var lastServing time.Time
	require.Eventually(t, func() bool {
		before := time.Now()
		if m.Serving() {
			lastServing = before
			return false
		}
		return true
	}, 10*time.Second, time.Millisecond, "the host never fenced itself")
	expiry := store.expiry("host-1") // the last renewal that got through
	require.True(t, lastServing.Before(expiry), "the host served at %v, after its membership expired at %v", lastServing, expiry)
	require.Empty(t, m.Members(), "a fenced host does not count itself a member")

	store.thaw()
	require.Eventually(t, m.Serving, 10*time.Second, time.Millisecond, "the host serves again once it renews")
}

// A host reads the members again just after another member's row expires, not at its next
// heartbeat: a host that stopped renewing is seen gone (and its shards taken) sooner.
func TestMonitorReadsTheMembersWhenARowExpires(t *testing.T) {
	store := newFreezableMembers()
	_, err := store.RenewMember(context.Background(), persistence.ClusterMember{HostID: "host-1"}, 300*time.Millisecond)
	require.NoError(t, err)
	cfg := ClusterConfig{MembershipHeartbeat: 5 * time.Second, MembershipTTL: 15 * time.Second}
	m, err := NewStoreMonitor(store, cfg, membership.Host{ID: "host-2", HistoryAddress: "h2"}, zaptest.NewLogger(t), nil)
	require.NoError(t, err)
	require.NoError(t, m.Start(context.Background()))
	t.Cleanup(func() { m.Stop(context.Background(), false) })
	renewals := store.renewals.Load()
	require.Len(t, m.Members(), 2, "host-1's row has not expired yet")
	require.Eventually(t, func() bool { return len(m.Members()) == 1 }, 10*time.Second, time.Millisecond,
		"host-1's expired row is still a member")
	require.Equal(t, renewals, store.renewals.Load(), "seen gone before host-2's next heartbeat")
}
