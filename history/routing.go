package history

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/common/metrics"
)

// MonitorMembership is the Membership of a cluster: a shard's host is the one
// membership.AssignShards gives it among the monitor's live members, the same answer the
// owning host's shard controller computes.
type MonitorMembership struct {
	numShards int32
	monitor   membership.Monitor

	mu         sync.Mutex
	members    []membership.Host
	assignment map[int32]string
	addresses  map[string]string
}

// NewMonitorMembership returns the membership of a cluster of numShards followed by monitor.
func NewMonitorMembership(numShards int32, monitor membership.Monitor) *MonitorMembership {
	return &MonitorMembership{numShards: numShards, monitor: monitor}
}

// HostForShard implements Membership.
func (m *MonitorMembership) HostForShard(shardID int32) (string, error) {
	members := m.monitor.Members()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.assignment == nil || !sameHosts(m.members, members) {
		m.members = members
		m.assignment = membership.AssignShards(m.numShards, members)
		m.addresses = make(map[string]string, len(members))
		for _, h := range members {
			m.addresses[h.ID] = h.HistoryAddress
		}
	}
	id, ok := m.assignment[shardID]
	if !ok {
		return "", errors.New("no live host")
	}
	return m.addresses[id], nil
}

// Rerouting: a call that meets a shard in motion is retried here, against whatever host the
// membership names next, until the caller's deadline (or rerouteMaxWait without one). So
// during a planned handoff a client sees a short delay and no error.
const (
	rerouteInitialBackoff = 10 * time.Millisecond
	rerouteMaxBackoff     = 200 * time.Millisecond
	rerouteMaxWait        = 10 * time.Second
)

// shardConn is the connection ConnForShard returns: each call goes to the shard's owner of
// the moment, and is retried while the shard is moving.
type shardConn struct {
	router  *Router
	shardID int32
}

func (c *shardConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(rerouteMaxWait)
	}
	backoff := rerouteInitialBackoff
	for {
		conn, remote, err := c.router.connForShard(c.shardID)
		if err == nil {
			if remote {
				metrics.HistoryRequestsForwarded.With(c.router.scope).Inc(1)
			}
			err = conn.Invoke(ctx, method, args, reply, opts...)
		}
		if err == nil || !shardMoving(err) || ctx.Err() != nil || time.Until(deadline) < backoff {
			return err
		}
		metrics.HistoryRequestsRerouted.With(c.router.scope).Inc(1)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, rerouteMaxBackoff)
	}
}

func (c *shardConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	conn, _, err := c.router.connForShard(c.shardID)
	if err != nil {
		return nil, err
	}
	return conn.NewStream(ctx, desc, method, opts...)
}

// shardMoving says whether err means the call reached no owner of its shard: the host no longer
// (or not yet) owns it, no host is known, or the host is gone. Such a call did nothing and
// may go to the next owner.
func shardMoving(err error) bool {
	var unavailable *serviceerror.Unavailable
	if !errors.As(err, &unavailable) {
		return false
	}
	msg := unavailable.Message
	for _, s := range []string{notOwnedText, noHostText, "connection refused", "connection reset", "error reading from server", "connection error",
		"transport is closing", "connection closed"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

const (
	notOwnedText = "is not owned by this host"
	noHostText   = "no host for shard"
)

func noHostError(shardID int32, err error) error {
	return serviceerror.NewUnavailable(fmt.Sprintf("%s %d: %v", noHostText, shardID, err))
}

// WithMetricsScope makes the router count forwarded and rerouted calls.
func WithMetricsScope(scope tally.Scope) RouterOption {
	return func(r *Router) { r.scope = scope }
}
