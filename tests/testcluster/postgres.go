package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigilhq/vigil/common/shard"
)

// Postgres is a fresh schema of the test PostgreSQL database that hosts share, dropped when the
// test ends.
type Postgres struct {
	DSN    string
	Schema string
	// Membership timings of the hosts; zero means the defaults (1 s, 3 s).
	MembershipHeartbeat time.Duration
	MembershipTTL       time.Duration
}

const testDSNDefault = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	dsnOnce sync.Once
	dsn     string
	dsnErr  error
)

// NewPostgres creates a schema for one test's cluster. It skips the test when PostgreSQL is
// unreachable (fails it under CI, which has PostgreSQL). VIGIL_POSTGRES_DSN overrides the
// default DSN.
func NewPostgres(t testing.TB) *Postgres {
	t.Helper()
	dsnOnce.Do(func() {
		dsn = cmpOr(os.Getenv("VIGIL_POSTGRES_DSN"), testDSNDefault)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			dsnErr = err
			return
		}
		_ = conn.Close(ctx)
	})
	if dsnErr != nil {
		msg := fmt.Sprintf("PostgreSQL unreachable (%v); start it or set VIGIL_POSTGRES_DSN", dsnErr)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	schema := "vigil_cluster_" + hex.EncodeToString(suffix[:])
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
	return &Postgres{DSN: dsn, Schema: schema}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// NewHosts starts n hosts ("host-1".."host-n") on one fresh PostgreSQL schema, one after the
// other, and waits until every shard is owned by exactly one of them.
func NewHosts(t testing.TB, n int, opts Options) []*Cluster {
	t.Helper()
	if opts.Postgres == nil {
		opts.Postgres = NewPostgres(t)
	}
	hosts := make([]*Cluster, n)
	for i := range hosts {
		o := opts
		o.HostID = fmt.Sprintf("host-%d", i+1)
		hosts[i] = New(t, o)
	}
	WaitForOwnership(t, hosts...)
	return hosts
}

// WaitForOwnership waits until the shards are spread over exactly the given running hosts:
// each shard owned by one of them, none by two, and each of them owning some (a host that
// just joined has taken its share).
func WaitForOwnership(t testing.TB, hosts ...*Cluster) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ownershipError(hosts)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testcluster: shards not settled: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ownershipError(hosts []*Cluster) error {
	if len(hosts) == 0 {
		return nil
	}
	numShards := hosts[0].srv.Engine().NumShards()
	owner := map[int32]string{}
	for _, h := range hosts {
		id := h.srv.Engine().Membership().Self().ID
		for _, s := range h.srv.Engine().OwnedShards() {
			if other, ok := owner[s]; ok {
				return fmt.Errorf("shard %d owned by %s and %s", s, other, id)
			}
			owner[s] = id
		}
	}
	if len(owner) != int(numShards) {
		return fmt.Errorf("%d of %d shards owned", len(owner), numShards)
	}
	for _, h := range hosts {
		if len(h.srv.Engine().OwnedShards()) == 0 {
			return fmt.Errorf("%s owns no shard yet", h.srv.Engine().Membership().Self().ID)
		}
	}
	return nil
}

// KeyOwnedBy returns the first business ID prefix-0, prefix-1, ... whose shard (of numShards,
// in namespace nsID) host owns in owners (Owners). It fails the test if host owns none.
func KeyOwnedBy(t testing.TB, owners map[int32]string, host, prefix, nsID string, numShards int32) string {
	t.Helper()
	if !slices.Contains(slices.Collect(maps.Values(owners)), host) {
		t.Fatalf("testcluster: %s owns no shard (owners: %v)", host, owners)
	}
	for i := 0; ; i++ {
		if key := fmt.Sprintf("%s-%d", prefix, i); owners[shard.ForKey(nsID, key, numShards)] == host {
			return key
		}
	}
}

// Owners returns which host ID serves each shard now among hosts.
func Owners(hosts ...*Cluster) map[int32]string {
	out := map[int32]string{}
	for _, h := range hosts {
		for _, s := range h.srv.Engine().OwnedShards() {
			out[s] = h.srv.Engine().Membership().Self().ID
		}
	}
	return out
}
