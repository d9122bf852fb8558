package history

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/vigilhq/vigil/common/metrics"
)

// Relaying: a host that cannot reach a shard's owner while that owner renews its membership
// (the history port cut between the two hosts alone, both reaching the database) sends a
// Resendable call through a third member instead, which forwards it to the owner. The owner
// renews, so it still holds the shard and can commit: nothing moves, nobody's lease is lost,
// and the call is answered by the owner as if it came directly.
//
// A call is relayed when its owner is not lapsing and either
//   - its direct attempt failed at once because the connection to the owner is down (refused,
//     reset, in TRANSIENT_FAILURE), or
//   - the owner has not answered it within hopBudget and has answered no call of this host in
//     that time either. An owner that answers other calls is reachable, only slow or queueing
//     in its admission, and its call is left to it: relaying it would only add load.
//
// A relayed call that the relay answers first wins; the direct attempt is canceled. The relay
// forwards the call directly and never relays it again, so a call makes at most two hops.
// Calls that are not Resendable are never relayed (their first delivery may have committed);
// they wait as before, within their deadline.

// relayHeader, on a call to a history host, names the history address of the host the call is
// for: the receiver forwards it there instead of serving it.
const relayHeader = "vigil-relay-to"

// errRelayed is the cause with which a direct attempt is canceled once its relay answered.
var errRelayed = errors.New("the call was answered through another host")

// relayLog is logged for each call relayed, with its outcome.
const relayLog = "relayed a call through another host: the shard's owner renews but did not answer this host"

// Relays is what a Membership may also offer: a live member, other than this host and the one at
// address, through which a call to address may be relayed.
type Relays interface {
	RelayFor(address string) (via string, ok bool)
}

// RelayFor implements Relays: the first member, by ID, that is neither this host nor the one at
// address and is not lapsing itself.
func (m *MonitorMembership) RelayFor(address string) (string, bool) {
	self := m.monitor.Self()
	for _, h := range m.monitor.Members() {
		if h.ID == self.ID || h.HistoryAddress == address || h.HistoryAddress == self.HistoryAddress || h.HistoryAddress == "" {
			continue
		}
		if m.Lapsing(h.HistoryAddress) {
			continue
		}
		return h.HistoryAddress, true
	}
	return "", false
}

// isMember reports whether address is the history address of a live member.
func (m *MonitorMembership) isMember(address string) bool {
	for _, h := range m.monitor.Members() {
		if h.HistoryAddress == address {
			return true
		}
	}
	return false
}

// answered records that the host at address answered a call (any outcome but a broken
// transport), for the relay's "answers nobody" test.
func (r *Router) answered(address string) {
	v, _ := r.lastAnswer.LoadOrStore(address, new(atomic.Int64))
	v.(*atomic.Int64).Store(time.Now().UnixNano())
}

// silentFor reports whether the host at address has answered no call for at least d (or never).
func (r *Router) silentFor(address string, d time.Duration) bool {
	v, ok := r.lastAnswer.Load(address)
	if !ok {
		return true
	}
	return time.Since(time.Unix(0, v.(*atomic.Int64).Load())) >= d
}

// transportBroken reports whether err is the transport's failure rather than an answer of the
// host: the call may not have reached it.
func transportBroken(err error) bool {
	switch serviceerror.ToStatus(err).Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		var unavailable *serviceerror.Unavailable
		if errors.As(err, &unavailable) && strings.Contains(unavailable.Message, notOwnedText) {
			return false
		}
		return true
	}
	return false
}

// connDown reports whether conn's connection is down (not ready nor idle).
func connDown(conn grpc.ClientConnInterface) bool {
	cc, ok := conn.(*grpc.ClientConn)
	if !ok {
		return false
	}
	switch cc.GetState() {
	case connectivity.TransientFailure, connectivity.Shutdown, connectivity.Connecting:
		return true
	}
	return false
}

// relayable reports whether a call to address may be relayed: it is Resendable, the membership
// can name a relay, and the owner renews (a lapsing owner's shard moves instead).
func (c *shardConn) relayVia(address string, resendable bool) (string, bool) {
	if !resendable {
		return "", false
	}
	relays, ok := c.router.membership.(Relays)
	if !ok {
		return "", false
	}
	if health, ok := c.router.membership.(HostHealth); ok && health.Lapsing(address) {
		return "", false
	}
	return relays.RelayFor(address)
}

// relay sends one call for the host at address through the host at via, into out: a reply of
// its own, never the direct attempt's, which that attempt may be decoding into meanwhile.
func (r *Router) relay(ctx context.Context, via, address, method string, args any, out proto.Message, opts ...grpc.CallOption) (any, error) {
	conn, err := r.ConnForHost(via)
	if err != nil {
		return nil, err
	}
	err = conn.Invoke(metadata.AppendToOutgoingContext(ctx, relayHeader, address), method, args, out, opts...)
	return out, err
}

// replyType returns the message type of reply, from which each relay makes a reply of its
// own. It must be called before the direct attempt starts decoding into reply: even reading
// reply's type races with that.
func replyType(method string, reply any) (protoreflect.MessageType, error) {
	msg, ok := reply.(proto.Message)
	if !ok {
		return nil, serviceerror.NewInternal(fmt.Sprintf("relay %s: the reply is not a protobuf message", method))
	}
	return msg.ProtoReflect().Type(), nil
}

// relayServerInterceptor forwards a call that names another host in relayHeader to that host,
// directly (never relayed again). The target must be a live member, so the history port of a
// host is no open proxy; the cluster secret, when set, was checked before this interceptor.
func relayServerInterceptor(r *Router) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		to := md.Get(relayHeader)
		if len(to) == 0 || r == nil {
			return handler(ctx, req)
		}
		target := to[0]
		mm, ok := r.membership.(*MonitorMembership)
		if !ok || !mm.isMember(target) {
			return nil, serviceerror.NewUnavailable(fmt.Sprintf("relay to %s refused: not a live member of this host's view", target))
		}
		if target == mm.monitor.Self().HistoryAddress {
			return handler(ctx, req)
		}
		reply, err := newReply(info.FullMethod)
		if err != nil {
			return nil, err
		}
		conn, err := r.ConnForHost(target)
		if err != nil {
			return nil, err
		}
		// The call's own outgoing metadata is rebuilt by the connection's interceptors (the
		// cluster secret); the deadline comes with ctx.
		if err := conn.Invoke(ctx, info.FullMethod, req, reply); err != nil {
			return nil, err
		}
		return reply, nil
	}
}

// newReply returns an empty reply of the unary method fullMethod ("/pkg.Service/Method"), from
// the protobuf registry.
func newReply(fullMethod string) (proto.Message, error) {
	service, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return nil, serviceerror.NewInvalidArgument(fmt.Sprintf("relay: malformed method %q", fullMethod))
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil, serviceerror.NewUnimplemented(fmt.Sprintf("relay: unknown service %s", service))
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, serviceerror.NewUnimplemented(fmt.Sprintf("relay: %s is not a service", service))
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil, serviceerror.NewUnimplemented(fmt.Sprintf("relay: unknown method %s", fullMethod))
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, serviceerror.NewUnimplemented(fmt.Sprintf("relay: unknown reply type of %s", fullMethod))
	}
	return mt.New().Interface(), nil
}

// logRelay logs and counts a relayed call's outcome.
func (r *Router) logRelay(method string, shardID int32, owner, via string, err error) {
	outcome := "answered"
	if err != nil && transportBroken(err) {
		outcome = "failed"
	}
	metrics.HistoryRequestsRelayed.With(r.scope, metrics.OutcomeTag(outcome)).Inc(1)
	r.logger.Warn(relayLog, zap.String("method", method), zap.Int32("shard", shardID),
		zap.String("owner", owner), zap.String("via", via), zap.String("outcome", outcome), zap.Error(err))
}
