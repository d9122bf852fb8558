package history

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/postgres"
	"github.com/vigilhq/vigil/tasks"
)

// settableMonitor is a membership whose live hosts the test sets; a view without Self is
// what a host sees once its own renewal lapsed.
type settableMonitor struct {
	self    membership.Host
	mu      sync.Mutex
	members []membership.Host
	subs    []chan struct{}
}

func (m *settableMonitor) Self() membership.Host { return m.self }

func (m *settableMonitor) Members() []membership.Host {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

func (m *settableMonitor) Subscribe() (<-chan struct{}, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{}, 1)
	m.subs = append(m.subs, ch)
	return ch, func() {}
}

func (m *settableMonitor) set(ids ...string) {
	m.mu.Lock()
	m.members = m.members[:0]
	for _, id := range ids {
		m.members = append(m.members, membership.Host{ID: id})
	}
	slices.SortFunc(m.members, func(a, b membership.Host) int { return cmpString(a.ID, b.ID) })
	subs := slices.Clone(m.subs)
	m.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// openLapseTestStore opens a PostgreSQL store (the backend that records handoffs) in a fresh
// schema, dropped at the end of the test.
func openLapseTestStore(t *testing.T) *postgres.Store {
	t.Helper()
	dsn := os.Getenv("VIGIL_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		msg := fmt.Sprintf("PostgreSQL unreachable (%v); start it or set VIGIL_POSTGRES_DSN", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	_ = conn.Close(ctx)
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	schema := "vigil_lapse_" + hex.EncodeToString(suffix[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	store, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema, MaxConns: 4}, zaptest.NewLogger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// TestLapsedMembershipIsNoHandoff: a host that drops shards because the membership moved them
// records a clean release (their next owner needs no grace), but a host whose own membership
// lapsed (it could not renew: paused, starved, cut off) does not: heartbeats to its shards were
// stalling too, and the next owner must give their leases the restart grace. It counts the
// shards as lost.
func TestLapsedMembershipIsNoHandoff(t *testing.T) {
	store := openLapseTestStore(t)
	logger := zaptest.NewLogger(t)
	dcClient := dynamicconfig.NewMemoryClient()
	// Past the takeover's own grace at once, so the first move below may be recorded as clean.
	dcClient.OverrideValue(dynamicconfig.LeaseExpiryGraceAfterRestart.Key(), time.Millisecond)
	scope := tally.NewTestScope("", nil)
	committer := persistence.NewGroupCommitter(store, persistence.GroupCommitOptions{}, logger, scope)
	committer.Start()
	t.Cleanup(committer.Stop)
	scheduler := tasks.NewScheduler(tasks.SchedulerOptions{})
	scheduler.Start()
	t.Cleanup(scheduler.Stop)

	mon := &settableMonitor{self: membership.Host{ID: "host-a"}}
	mon.set("host-a")
	const numShards = 8
	e, err := NewEngine(EngineParams{
		Config: Config{NumShards: numShards, HostID: "host-a"}, Registry: chasm.NewRegistry(), Store: store,
		Committer: committer, Scheduler: scheduler, DynamicConfig: dynamicconfig.NewCollection(dcClient, logger),
		Logger: logger, MetricsScope: scope, Membership: mon,
	})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	t.Cleanup(e.Stop)
	require.Len(t, e.OwnedShards(), numShards)

	released := func(ids []int32) []bool {
		out := make([]bool, len(ids))
		for i, id := range ids {
			info, err := store.GetShard(ctx, id)
			require.NoError(t, err)
			out[i] = info.Released
		}
		return out
	}
	all := func(v bool, n int) []bool {
		out := make([]bool, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	handedOff := func(before []int32) []int32 {
		now := e.OwnedShards()
		var out []int32
		for _, id := range before {
			if !slices.Contains(now, id) {
				out = append(out, id)
			}
		}
		return out
	}

	// A second host joins: the shards assigned to it are handed off cleanly.
	before := e.OwnedShards()
	mon.set("host-a", "host-b")
	assigned := 0
	for _, owner := range membership.AssignShards(numShards, mon.Members()) {
		if owner == "host-a" {
			assigned++
		}
	}
	require.Eventually(t, func() bool { return len(e.OwnedShards()) == assigned }, 30*time.Second, 10*time.Millisecond)
	moved := handedOff(before)
	require.NotEmpty(t, moved)
	require.Eventually(t, func() bool { return slices.Equal(all(true, len(moved)), released(moved)) }, 30*time.Second, 10*time.Millisecond,
		"a rebalance is a clean handoff")

	// This host's own renewal lapses: it stops serving the rest, and records no release.
	before = e.OwnedShards()
	mon.set("host-b")
	// Losses are counted once the shards are stopped, and the releases (if any) recorded.
	losses := func() int64 {
		if c, ok := scope.Snapshot().Counters()["history.shard_losses+"]; ok {
			return c.Value()
		}
		return 0
	}
	require.Eventually(t, func() bool {
		return len(e.OwnedShards()) == 0 && (losses() == int64(len(before)) || slices.Contains(released(before), true))
	}, 30*time.Second, 10*time.Millisecond, "the lapsed host neither counted its shards lost nor released them")
	require.Equal(t, all(false, len(before)), released(before), "a lapsed host's shards were recorded as handed off")
	require.EqualValues(t, len(before), losses())
}
