package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/common/metrics"
)

// MonitorMembership is the Membership of a cluster: a shard's host is the one
// membership.AssignShards gives it among the monitor's live members, the same answer the
// owning host's shard controller computes.
type MonitorMembership struct {
	numShards int32
	monitor   membership.Monitor
	// fixed is set for a membership that never changes (membership.Static): its hosts renew
	// nothing, and a call is never taken back from one.
	fixed bool

	mu         sync.Mutex
	members    []membership.Host
	assignment map[int32]string
	addresses  map[string]string
	assigned   atomic.Bool // assignment was made
}

// NewMonitorMembership returns the membership of a cluster of numShards followed by monitor.
func NewMonitorMembership(numShards int32, monitor membership.Monitor) *MonitorMembership {
	_, fixed := monitor.(*membership.Static)
	return &MonitorMembership{numShards: numShards, monitor: monitor, fixed: fixed}
}

// HostForShard implements Membership.
func (m *MonitorMembership) HostForShard(shardID int32) (string, error) {
	// Every heartbeat is routed here, and reading the members copies them: a fixed
	// membership's assignment, made once, holds for good.
	read := !m.fixed || !m.assigned.Load()
	var members []membership.Host
	if read {
		members = m.monitor.Members()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if read && (m.assignment == nil || !sameHosts(m.members, members)) {
		m.members = members
		m.assignment = membership.AssignShards(m.numShards, members)
		m.addresses = make(map[string]string, len(members))
		for _, h := range members {
			m.addresses[h.ID] = h.HistoryAddress
		}
		m.assigned.Store(true)
	}
	id, ok := m.assignment[shardID]
	if !ok {
		return "", errors.New("no live host")
	}
	return m.addresses[id], nil
}

// HostHealth is what a Membership may also say about the hosts it names: whether one has
// stopped renewing its membership. Such a host may be unable to commit anything, and its
// shards move to other hosts once its row expires.
type HostHealth interface {
	// Lapsing reports whether the host serving at address missed a membership renewal (or is
	// no longer a member).
	Lapsing(address string) bool
}

// Lapsing implements HostHealth. Renewal times are the database's clock: the owner's last
// renewal is compared with this host's own, never with this host's clock. A host renews every
// membership heartbeat; one whose last renewal is more than half a TTL older than this host's
// missed at least one.
func (m *MonitorMembership) Lapsing(address string) bool {
	self := m.monitor.Self()
	for _, h := range m.monitor.Members() {
		if h.HistoryAddress != address {
			continue
		}
		if h.ID == self.ID || self.LastRenewal.IsZero() || h.LastRenewal.IsZero() {
			return false
		}
		return self.LastRenewal.Sub(h.LastRenewal) > h.Expiry.Sub(h.LastRenewal)/2
	}
	return true
}

// Rerouting: a call that meets a shard in motion is retried here, against whatever host the
// membership names next, until the caller's deadline (or rerouteMaxWait without one). So
// during a planned handoff a client sees a short delay and no error.
const (
	rerouteInitialBackoff = 10 * time.Millisecond
	rerouteMaxBackoff     = 200 * time.Millisecond
	rerouteMaxWait        = 10 * time.Second
)

// Failing a call over: a call its shard's owner has not answered within hopBudget is watched
// every failoverPoll. Once the membership names another owner for the shard and the old one
// is lapsing or gone (its row expired: by the self-fencing bound it stopped serving the shard
// before that, docs/failover.md), the call is taken back and, if it is Resendable, sent to the
// new owner; otherwise it is answered Unavailable, its outcome unknown. An owner handing the
// shard off in a planned move still renews: it finishes the calls it holds or answers them
// "not owned", and they are rerouted as before. While the owner is lapsing (it
// missed renewals, so it may not be able to commit) and the shard has not moved yet, the call
// waits, but is answered Unavailable stalledOwnerMargin before the caller's deadline rather
// than spending it. A slow owner that still renews its membership can commit (the renewal is
// a commit to the same store): its calls are left to their deadline and its admission.
const (
	hopBudget          = time.Second
	failoverPoll       = 50 * time.Millisecond
	stalledOwnerMargin = time.Second
)

// errShardMoved and errOwnerStalled are the causes with which a call is taken back from an
// owner that stopped answering.
var (
	errShardMoved   = errors.New("the shard moved to another host")
	errOwnerStalled = errors.New("the shard's owner missed its membership renewals and did not answer")
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
		address, conn, remote, err := c.router.connForShard(c.shardID)
		if err == nil {
			if remote {
				metrics.HistoryRequestsForwarded.With(c.router.scope).Inc(1)
			}
			err = c.attempt(ctx, deadline, address, conn, remote, method, args, reply, opts...)
		}
		var taken *takenBackError
		if errors.As(err, &taken) {
			if taken.cause == errShardMoved && ctx.Err() == nil && slices.ContainsFunc(opts, isResendable) {
				c.router.logger.Warn(takenBackLog, zap.String("method", method), zap.Int32("shard", c.shardID),
					zap.String("owner", taken.address), zap.String("outcome", "resent"), zap.Error(taken.cause))
				metrics.HistoryRequestsRerouted.With(c.router.scope).Inc(1)
				backoff = rerouteInitialBackoff
				continue
			}
			c.router.logger.Warn(takenBackLog, zap.String("method", method), zap.Int32("shard", c.shardID),
				zap.String("owner", taken.address), zap.String("outcome", "unavailable"), zap.Error(taken.cause))
			return serviceerror.NewUnavailable(taken.Error())
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

// takenBackLog is logged for every call taken back from an owner that stopped answering, with
// its outcome: resent to the next owner, or answered unavailable.
const takenBackLog = "took a call back from a shard owner that stopped answering"

// takenBackError is a call taken back from the owner at address (errShardMoved or
// errOwnerStalled).
type takenBackError struct {
	shardID int32
	address string
	cause   error
}

func (e *takenBackError) Error() string {
	return fmt.Sprintf("shard %d: the host at %s did not answer: %v; the call's outcome is unknown, retry", e.shardID, e.address, e.cause)
}

// attempt sends one call to the owner at address (remote: another host) and, past hopBudget,
// watches that owner until it answers: see hopBudget, and relay.go for a call relayed through
// another host.
func (c *shardConn) attempt(ctx context.Context, deadline time.Time, address string, conn grpc.ClientConnInterface, remote bool,
	method string, args, reply any, opts ...grpc.CallOption,
) error {
	if !watchable(c.router.membership) {
		// A membership that cannot tell a lapsing host (one host, a fixed list): nothing
		// would ever be taken back, so nothing is watched.
		return conn.Invoke(ctx, method, args, reply, opts...)
	}
	relayable := remote && slices.ContainsFunc(opts, isResendable)
	call := &relayedCall{method: method, args: args, opts: opts}
	if relayable {
		// Read now, before the direct attempt decodes into reply.
		var err error
		if call.replyType, err = replyType(method, reply); err != nil {
			return err
		}
	}
	attemptCtx, cancel := context.WithCancelCause(ctx)
	watch := time.AfterFunc(hopBudget, func() { c.watchOwner(attemptCtx, cancel, deadline, address, relayable, call) })
	err := conn.Invoke(attemptCtx, method, args, reply, opts...)
	if remote && (err == nil || !transportBroken(err)) {
		c.router.answered(address)
	}
	cause := context.Cause(attemptCtx)
	watch.Stop()
	cancel(nil)
	if err != nil && ctx.Err() == nil && cause == errRelayed {
		return call.result(reply)
	}
	if err != nil && ctx.Err() == nil && (cause == errShardMoved || cause == errOwnerStalled) {
		return &takenBackError{shardID: c.shardID, address: address, cause: cause}
	}
	if err != nil && relayable && ctx.Err() == nil && transportBroken(err) && connDown(conn) {
		// The owner cannot be reached at all from here (refused, reset): through another host
		// at once, if it still renews.
		if via, ok := c.relayVia(address, true); ok {
			out, rerr := c.router.relay(ctx, via, address, method, args, call.newReply(), opts...)
			c.router.logRelay(method, c.shardID, address, via, rerr)
			if rerr == nil || !transportBroken(rerr) {
				call.set(out, rerr, nil)
				return call.result(reply)
			}
		}
	}
	return err
}

// relayedCall is one call's relay through another host: what to send, and the relay's answer
// once it came (set once).
type relayedCall struct {
	method string
	args   any
	// replyType is the reply's type: each relay decodes into a reply of its own, never the
	// one the direct attempt decodes into.
	replyType protoreflect.MessageType
	opts      []grpc.CallOption
	inFlight  atomic.Bool

	mu   sync.Mutex
	done bool
	out  any
	err  error
}

// newReply returns an empty reply for one relay.
func (r *relayedCall) newReply() proto.Message { return r.replyType.New().Interface() }

// set records the relay's answer, once, and cancels the direct attempt (when cancel is set).
func (r *relayedCall) set(out any, err error, cancel context.CancelCauseFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.done, r.out, r.err = true, out, err
	if cancel != nil {
		cancel(errRelayed)
	}
}

// result copies the relay's reply into reply and returns its error.
func (r *relayedCall) result(reply any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		dst, okDst := reply.(proto.Message)
		src, okSrc := r.out.(proto.Message)
		if !okDst || !okSrc {
			return serviceerror.NewInternal("relay: the reply is not a protobuf message")
		}
		proto.Reset(dst)
		proto.Merge(dst, src)
	}
	return r.err
}

// watchOwner takes the call attemptCtx carries back (cancel) once the shard moved away from
// address, or once the owner is lapsing and the caller's deadline is near; while the owner
// renews but answers nobody, a relayable call is also sent through another host (relay.go).
func (c *shardConn) watchOwner(attemptCtx context.Context, cancel context.CancelCauseFunc, deadline time.Time, address string,
	relayable bool, call *relayedCall,
) {
	health := c.router.membership.(HostHealth)
	ticker := time.NewTicker(failoverPoll)
	defer ticker.Stop()
	var relayTried time.Time
	for {
		lapsing := health.Lapsing(address)
		if now, err := c.router.membership.HostForShard(c.shardID); err == nil && now != address && lapsing {
			cancel(errShardMoved)
			return
		}
		if lapsing && time.Until(deadline) < stalledOwnerMargin {
			cancel(errOwnerStalled)
			return
		}
		if relayable && !lapsing && time.Since(relayTried) >= hopBudget && !call.inFlight.Load() && c.router.silentFor(address, hopBudget) {
			if via, ok := c.relayVia(address, true); ok {
				relayTried = time.Now()
				call.inFlight.Store(true)
				go func() {
					defer call.inFlight.Store(false)
					out, err := c.router.relay(attemptCtx, via, address, call.method, call.args, call.newReply(), call.opts...)
					if attemptCtx.Err() != nil {
						return // the direct attempt answered, or the caller gave up
					}
					c.router.logRelay(call.method, c.shardID, address, via, err)
					if err == nil || !transportBroken(err) {
						call.set(out, err, cancel)
					}
				}()
			}
		}
		select {
		case <-attemptCtx.Done():
			return
		case <-ticker.C:
		}
	}
}

// watchable reports whether m can tell that a host is lapsing: a HostHealth whose hosts renew
// a membership (not a fixed list, as a single host on SQLite has).
func watchable(m Membership) bool {
	if _, ok := m.(HostHealth); !ok {
		return false
	}
	mm, ok := m.(*MonitorMembership)
	return !ok || !mm.fixed
}

func isResendable(o grpc.CallOption) bool {
	_, ok := o.(chasm.ResendableOption)
	return ok
}

func (c *shardConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	_, conn, _, err := c.router.connForShard(c.shardID)
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

// WithRouterLogger makes the router log the calls it takes back from an owner that stopped
// answering.
func WithRouterLogger(logger *zap.Logger) RouterOption {
	return func(r *Router) { r.logger = logger }
}
