package matching

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/common/metrics"
	matchingpb "github.com/vigilhq/vigil/matching/gen/matchingpb/v1"
)

// Client defaults, used when the corresponding ClientOptions field is zero.
const (
	// RPCTimeoutDefault bounds each try of a forwarded call other than a poll (within the
	// caller's deadline, if sooner), and a hand-over.
	RPCTimeoutDefault = 5 * time.Second
	// NotOwnerRetryMaxDefault is the longest a call waits between two tries when the host it
	// asked answered "not owner" or could not be reached, before trying again. A change of this
	// host's member view ends the wait at once.
	NotOwnerRetryMaxDefault = time.Second
	// NotOwnerAttemptsDefault is how many times a call other than a poll tries before it gives
	// up with Unavailable (the caller retries: history's dispatch tasks do). Polls try until
	// their own deadline and then answer empty.
	NotOwnerAttemptsDefault = 6
)

// Keepalive of the connections to other hosts.
const (
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = 5 * time.Second
)

// ClientOptions configures a Client. Zero values take the defaults.
type ClientOptions struct {
	RPCTimeout       time.Duration
	NotOwnerRetryMax time.Duration
	NotOwnerAttempts int
	Logger           *zap.Logger
	Scope            tally.Scope
	// DialOptions are added to every connection to another host (tests use them).
	DialOptions []grpc.DialOption
}

// Client is the host's way into matching in a cluster. Every queue (namespace, task queue) and
// every worker control queue has one owner among the live hosts, chosen by rendezvous hashing
// of membership.TaskQueueKey over the members: a call for a queue this host owns goes to the
// local Matcher in process; any other goes over gRPC to the owner's MatchingService, on its
// history address. The local Matcher serves only the queues the view says this host owns, and
// Client keeps it to that view as members come and go (Start).
//
// It implements what the frontend needs (frontend.Matching) and, through the server's small
// adapters, the activity component's Dispatcher and CommandSender.
type Client struct {
	local   *Matcher
	monitor membership.Monitor
	opts    ClientOptions
	logger  *zap.Logger
	scope   tally.Scope
	ts      clock.TimeSource

	view atomic.Pointer[view]

	connMu sync.Mutex
	conns  map[string]*grpc.ClientConn

	handedOver tally.Counter

	startOnce, stopOnce sync.Once
	unsubscribe         func()
	stopCh, done        chan struct{}
	// stopCtx ends hand-overs in progress at Stop.
	stopCtx    context.Context
	cancelStop context.CancelFunc
}

// view is one snapshot of the members. Routing and the local matcher's ownership both read the
// current snapshot, so that they always agree.
type view struct {
	self  string
	hosts []membership.Host
	// changed is closed when a newer view replaces this one.
	changed chan struct{}
}

// owner returns the host owning the queue and whether it is this host. A view with no member
// (this host cannot see even itself, e.g. before its first renewal) serves every queue locally.
func (v *view) owner(namespaceID, queue string) (membership.Host, bool) {
	h, ok := membership.Owner(membership.TaskQueueKey(namespaceID, queue), v.hosts)
	if !ok {
		return membership.Host{ID: v.self}, true
	}
	return h, h.ID == v.self
}

// NewClient returns a client over the local matcher and the monitor's members. It sets the
// matcher's ownership (Matcher.SetOwnership) to this client's view. Start follows member
// changes; until then the view is the members at construction.
func NewClient(local *Matcher, monitor membership.Monitor, opts ClientOptions) *Client {
	if opts.RPCTimeout <= 0 {
		opts.RPCTimeout = RPCTimeoutDefault
	}
	if opts.NotOwnerRetryMax <= 0 {
		opts.NotOwnerRetryMax = NotOwnerRetryMaxDefault
	}
	if opts.NotOwnerAttempts <= 0 {
		opts.NotOwnerAttempts = NotOwnerAttemptsDefault
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	scope := opts.Scope
	if scope == nil {
		scope = tally.NoopScope
	}
	c := &Client{
		local: local, monitor: monitor, opts: opts,
		logger:     logger.With(tag.Component("matching-client")),
		scope:      scope,
		ts:         local.ts,
		conns:      make(map[string]*grpc.ClientConn),
		handedOver: TasksHandedOver.With(scope),
		stopCh:     make(chan struct{}),
		done:       make(chan struct{}),
	}
	c.stopCtx, c.cancelStop = context.WithCancel(context.Background())
	c.view.Store(c.newView())
	local.SetOwnership(func(namespaceID, queue string) bool {
		_, self := c.view.Load().owner(namespaceID, queue)
		return self
	})
	return c
}

func (c *Client) newView() *view {
	return &view{self: c.monitor.Self().ID, hosts: c.monitor.Members(), changed: make(chan struct{})}
}

// Start follows the monitor: on every change of members the view is replaced, the local
// matcher releases the queues it no longer owns (their polls are answered empty), and their
// tasks and commands are handed to the new owners.
func (c *Client) Start() {
	c.startOnce.Do(func() {
		ch, unsubscribe := c.monitor.Subscribe()
		c.unsubscribe = unsubscribe
		// A change between NewClient and Subscribe would otherwise go unseen.
		c.refresh()
		go c.follow(ch)
	})
}

// Stop ends following the monitor and closes the connections to other hosts.
func (c *Client) Stop() {
	c.stopOnce.Do(func() {
		close(c.stopCh)
		c.cancelStop()
		if c.unsubscribe != nil {
			c.unsubscribe()
			<-c.done
		}
		c.connMu.Lock()
		defer c.connMu.Unlock()
		for address, conn := range c.conns {
			_ = conn.Close()
			delete(c.conns, address)
		}
	})
}

func (c *Client) follow(ch <-chan struct{}) {
	defer close(c.done)
	for {
		select {
		case <-c.stopCh:
			return
		case <-ch:
			c.refresh()
		}
	}
}

// refresh installs the monitor's current members as the view, releases what this host no
// longer owns and hands it over.
func (c *Client) refresh() {
	next := c.newView()
	prev := c.view.Swap(next)
	close(prev.changed)
	released := c.local.ReleaseUnowned()
	if len(released.Tasks) > 0 || len(released.Commands) > 0 || released.Polls > 0 {
		c.logger.Info("matching queues moved to other hosts",
			zap.Int("tasks", len(released.Tasks)), zap.Int("commands", len(released.Commands)), zap.Int("polls-ended", released.Polls))
	}
	c.closeStaleConns(prev, next)
	if len(released.Tasks) > 0 || len(released.Commands) > 0 {
		c.handOver(next, released)
	}
}

// handOver sends released tasks and commands to their new owners, one call per owner. Best
// effort: whatever does not arrive is re-queued by history (every host re-queues the
// dispatched activities of its shards after a membership change), and commands are best
// effort anyway.
func (c *Client) handOver(v *view, released Released) {
	byOwner := make(map[string]*matchingpb.HandOverRequest)
	owners := make(map[string]membership.Host)
	req := func(namespaceID, queue string) *matchingpb.HandOverRequest {
		h, self := v.owner(namespaceID, queue)
		if self {
			return nil // owned again already (a later view): queue it here
		}
		r := byOwner[h.ID]
		if r == nil {
			r = &matchingpb.HandOverRequest{}
			byOwner[h.ID], owners[h.ID] = r, h
		}
		return r
	}
	for _, t := range released.Tasks {
		if r := req(t.NamespaceID, t.TaskQueue); r != nil {
			r.Tasks = append(r.Tasks, refToProto(t))
		} else {
			_ = c.local.AddActivityTask(t)
		}
	}
	for _, q := range released.Commands {
		if r := req(q.NamespaceID, q.ControlQueue); r != nil {
			r.Commands = append(r.Commands, &matchingpb.QueuedCommand{
				NamespaceId: q.NamespaceID, ControlQueue: q.ControlQueue, Command: commandToProto(q.Command)})
		} else {
			_ = c.local.AddWorkerCommand(q.NamespaceID, q.ControlQueue, q.Command)
		}
	}
	var wg sync.WaitGroup
	for id, r := range byOwner {
		wg.Add(1)
		go func(h membership.Host, r *matchingpb.HandOverRequest) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(c.stopCtx, c.opts.RPCTimeout)
			defer cancel()
			resp, err := c.remote(h, "HandOver").HandOver(ctx, r)
			if err != nil {
				c.logger.Warn("could not hand matching tasks over to their new owner (history re-queues them)",
					zap.String("host", h.ID), zap.Int("tasks", len(r.Tasks)), zap.Int("commands", len(r.Commands)), tag.Error(err))
				return
			}
			c.handedOver.Inc(int64(resp.GetTasksAccepted()))
			c.handOverAgain(resp)
		}(owners[id], r)
	}
	wg.Wait()
}

// handOverAgain routes, one by one and with the usual "not owner" retries, what a new owner
// sent back because it had not yet learnt that it owns it.
func (c *Client) handOverAgain(resp *matchingpb.HandOverResponse) {
	tasks := resp.GetNotOwnedTasks()
	for i, t := range tasks {
		if err := c.AddActivityTask(c.stopCtx, refFromProto(t)); err != nil {
			// Ownership has not settled within the retries: the rest would wait as long. History
			// re-queues them once members are stable.
			c.logger.Warn("could not hand matching tasks over to their new owner (history re-queues them)",
				zap.Int("tasks", len(tasks)-i), tag.Error(err))
			break
		}
		c.handedOver.Inc(1)
	}
	for _, q := range resp.GetNotOwnedCommands() {
		_ = c.AddWorkerCommand(c.stopCtx, q.GetNamespaceId(), q.GetControlQueue(), commandFromProto(q.GetCommand()))
	}
}

// AddActivityTask queues ref on its queue's owner. Errors are the Matcher's (ErrBacklogFull,
// ErrInvalidArgument, ErrStopped), or Unavailable when the owner cannot be reached or
// ownership does not settle within NotOwnerAttempts tries.
func (c *Client) AddActivityTask(ctx context.Context, ref ActivityTaskRef) error {
	if err := ref.validate(); err != nil {
		return err
	}
	return c.call(ctx, ref.NamespaceID, ref.TaskQueue,
		func() error { return c.local.AddActivityTask(ref) },
		func(ctx context.Context, h membership.Host) (bool, error) {
			resp, err := c.remote(h, "AddActivityTask").AddActivityTask(ctx, &matchingpb.AddActivityTaskRequest{Task: refToProto(ref)})
			return resp.GetNotOwner(), err
		})
}

// ReturnActivityTask puts back a task a poll could not deliver, on its queue's owner.
func (c *Client) ReturnActivityTask(ref ActivityTaskRef) error {
	if err := ref.validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RPCTimeout)
	defer cancel()
	return c.call(ctx, ref.NamespaceID, ref.TaskQueue,
		func() error { return c.local.ReturnActivityTask(ref) },
		func(ctx context.Context, h membership.Host) (bool, error) {
			resp, err := c.remote(h, "ReturnActivityTask").ReturnActivityTask(ctx, &matchingpb.ReturnActivityTaskRequest{Task: refToProto(ref)})
			return resp.GetNotOwner(), err
		})
}

// AddWorkerCommand queues a command on its control queue's owner.
func (c *Client) AddWorkerCommand(ctx context.Context, namespaceID, controlQueue string, cmd WorkerCommand) error {
	if namespaceID == "" || controlQueue == "" || cmd.ID == "" {
		return fmt.Errorf("%w: worker command needs a namespace, control queue and ID", ErrInvalidArgument)
	}
	return c.call(ctx, namespaceID, controlQueue,
		func() error { return c.local.AddWorkerCommand(namespaceID, controlQueue, cmd) },
		func(ctx context.Context, h membership.Host) (bool, error) {
			resp, err := c.remote(h, "AddWorkerCommand").AddWorkerCommand(ctx, &matchingpb.AddWorkerCommandRequest{
				NamespaceId: namespaceID, ControlQueue: controlQueue, Command: commandToProto(cmd)})
			return resp.GetNotOwner(), err
		})
}

// AckWorkerCommand removes a delivered command on its control queue's owner; false if it was
// no longer queued or the owner could not be reached (the command is then redelivered, which
// the worker tolerates).
func (c *Client) AckWorkerCommand(namespaceID, controlQueue, commandID string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RPCTimeout)
	defer cancel()
	acked := false
	err := c.call(ctx, namespaceID, controlQueue,
		func() error {
			if acked = c.local.AckWorkerCommand(namespaceID, controlQueue, commandID); !acked && !c.local.Owns(namespaceID, controlQueue) {
				return ErrNotOwner
			}
			return nil
		},
		func(ctx context.Context, h membership.Host) (bool, error) {
			resp, err := c.remote(h, "AckWorkerCommand").AckWorkerCommand(ctx, &matchingpb.AckWorkerCommandRequest{
				NamespaceId: namespaceID, ControlQueue: controlQueue, CommandId: commandID})
			acked = resp.GetAcked()
			return resp.GetNotOwner(), err
		})
	if err != nil {
		c.logger.Debug("could not acknowledge a worker command", tag.NamespaceID(namespaceID), controlQueueField(controlQueue), tag.Error(err))
	}
	return acked
}

// CompletePollsOfWorker ends the worker's open activity polls and tombstones the worker on every
// host: a worker polls several task queues, each with its own owner, so every member is told
// (in parallel, each call bounded by RPCTimeout). It returns the number of polls ended.
func (c *Client) CompletePollsOfWorker(namespaceID, workerInstanceKey string) int {
	if workerInstanceKey == "" {
		return 0
	}
	v := c.view.Load()
	var total atomic.Int64
	total.Add(int64(c.local.CompletePollsOfWorker(namespaceID, workerInstanceKey)))
	var wg sync.WaitGroup
	for _, h := range v.hosts {
		if h.ID == v.self {
			continue
		}
		wg.Add(1)
		go func(h membership.Host) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), c.opts.RPCTimeout)
			defer cancel()
			resp, err := c.remote(h, "CompletePollsOfWorker").CompletePollsOfWorker(ctx, &matchingpb.CompletePollsOfWorkerRequest{
				NamespaceId: namespaceID, WorkerInstanceKey: workerInstanceKey})
			if err != nil {
				c.logger.Warn("could not complete a shutting-down worker's polls on another host (they end at their deadline)",
					zap.String("host", h.ID), tag.WorkerID(workerInstanceKey), tag.Error(err))
				return
			}
			total.Add(int64(resp.GetCompleted()))
		}(h)
	}
	wg.Wait()
	return int(total.Load())
}

// PollActivityTask polls the queue's owner, with the caller's deadline. A poll that meets an
// ownership change (the owner answers "not owner", or cannot be reached because it just died)
// tries again, at the new owner once this host's view has it, until the poll's own deadline:
// then it answers empty, as a poll that found no task. It never returns an error for a
// queue in motion, which the SDK would back off on.
func (c *Client) PollActivityTask(ctx context.Context, poll ActivityPoll) (ActivityTaskRef, bool, error) {
	if poll.NamespaceID == "" || poll.TaskQueue == "" {
		return ActivityTaskRef{}, false, fmt.Errorf("%w: poll needs a namespace and task queue", ErrInvalidArgument)
	}
	var (
		ref ActivityTaskRef
		ok  bool
	)
	err := c.poll(ctx, poll.NamespaceID, poll.TaskQueue,
		func() (err error) {
			ref, ok, err = c.local.PollActivityTask(ctx, poll)
			return err
		},
		func(h membership.Host) (bool, error) {
			resp, err := c.remote(h, "PollActivityTask").PollActivityTask(ctx, &matchingpb.PollActivityTaskRequest{
				NamespaceId: poll.NamespaceID, TaskQueue: poll.TaskQueue, Identity: poll.Identity, WorkerInstanceKey: poll.WorkerInstanceKey,
				RatePerSecond: poll.RatePerSecond})
			if t := resp.GetTask(); t != nil {
				ref, ok = refFromProto(t), true
			}
			return resp.GetNotOwner(), err
		})
	if err != nil || !ok {
		return ActivityTaskRef{}, false, err
	}
	return ref, true, nil
}

// DescribeActivityQueue describes the queue as its owner knows it (Matcher.DescribeActivityQueue),
// with the owner's host ID, routed and retried like AddActivityTask.
func (c *Client) DescribeActivityQueue(ctx context.Context, namespaceID, taskQueue string) (QueueDescription, error) {
	if namespaceID == "" || taskQueue == "" {
		return QueueDescription{}, fmt.Errorf("%w: describe needs a namespace and task queue", ErrInvalidArgument)
	}
	var d QueueDescription
	err := c.call(ctx, namespaceID, taskQueue,
		func() (err error) {
			d, err = c.local.DescribeActivityQueue(ctx, namespaceID, taskQueue)
			d.Owner = c.monitor.Self().ID
			return err
		},
		func(ctx context.Context, h membership.Host) (bool, error) {
			resp, err := c.remote(h, "DescribeActivityQueue").DescribeActivityQueue(ctx, &matchingpb.DescribeActivityQueueRequest{
				NamespaceId: namespaceID, TaskQueue: taskQueue})
			if err == nil && !resp.GetNotOwner() {
				d = descriptionFromProto(resp)
				d.Owner = h.ID
			}
			return resp.GetNotOwner(), err
		})
	if err != nil {
		return QueueDescription{}, err
	}
	return d, nil
}

// PollWorkerCommand polls the control queue's owner, like PollActivityTask.
func (c *Client) PollWorkerCommand(ctx context.Context, namespaceID, controlQueue string) (WorkerCommand, bool, error) {
	if namespaceID == "" || controlQueue == "" {
		return WorkerCommand{}, false, fmt.Errorf("%w: poll needs a namespace and control queue", ErrInvalidArgument)
	}
	var (
		cmd WorkerCommand
		ok  bool
	)
	err := c.poll(ctx, namespaceID, controlQueue,
		func() (err error) {
			cmd, ok, err = c.local.PollWorkerCommand(ctx, namespaceID, controlQueue)
			return err
		},
		func(h membership.Host) (bool, error) {
			resp, err := c.remote(h, "PollWorkerCommand").PollWorkerCommand(ctx, &matchingpb.PollWorkerCommandRequest{
				NamespaceId: namespaceID, ControlQueue: controlQueue})
			if cm := resp.GetCommand(); cm != nil {
				cmd, ok = commandFromProto(cm), true
			}
			return resp.GetNotOwner(), err
		})
	if err != nil || !ok {
		return WorkerCommand{}, false, err
	}
	return cmd, true, nil
}

// call runs a short call on the queue's owner: local in process, or remote (which answers
// notOwner, or fails). It retries on "not owner" and on an unreachable owner, each time with the
// current view, at most NotOwnerAttempts times and within ctx.
func (c *Client) call(ctx context.Context, namespaceID, queue string, local func() error, remote func(context.Context, membership.Host) (notOwner bool, err error)) error {
	var last error
	for attempt := 0; attempt < c.opts.NotOwnerAttempts; attempt++ {
		v := c.view.Load()
		h, self := v.owner(namespaceID, queue)
		var retry bool
		if self {
			err := local()
			if !errors.Is(err, ErrNotOwner) {
				return err
			}
			retry, last = true, err
		} else {
			// Each try is bounded, whatever the caller's deadline: a host that hangs (paused,
			// cut off) must not hold the call until the connection's keepalive gives up.
			attemptCtx, cancel := context.WithTimeout(ctx, c.opts.RPCTimeout)
			notOwner, err := remote(attemptCtx, h)
			timedOut := attemptCtx.Err() != nil
			cancel()
			switch {
			case err != nil && ctx.Err() != nil:
				return ctx.Err()
			case err != nil && (isUnreachable(err) || timedOut):
				retry, last = true, err
			case err != nil:
				return fromServiceError(err)
			case notOwner:
				retry, last = true, fmt.Errorf("%w: host %s", ErrNotOwner, h.ID)
			default:
				return nil
			}
		}
		if retry && !c.waitForView(ctx, v, attempt, time.Time{}) {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return serviceerror.NewUnavailablef("task queue %q is changing hosts: %v", queue, last)
}

// poll runs a long poll on the queue's owner. It retries like call, but until the poll's own
// deadline (the local matcher's, PollDeadlineMargin before ctx's), and then answers empty.
func (c *Client) poll(ctx context.Context, namespaceID, queue string, local func() error, remote func(membership.Host) (notOwner bool, err error)) error {
	until := c.ts.Now().Add(c.local.pollWait(ctx, c.ts.Now()))
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !c.ts.Now().Before(until) {
			return nil // the poll's time is up: answer empty
		}
		v := c.view.Load()
		h, self := v.owner(namespaceID, queue)
		if self {
			err := local()
			if !errors.Is(err, ErrNotOwner) {
				return err
			}
		} else {
			notOwner, err := remote(h)
			switch {
			case err != nil && ctx.Err() != nil:
				return ctx.Err()
			case err != nil && !isUnreachable(err):
				return fromServiceError(err)
			case err != nil:
				c.logger.Debug("task queue owner unreachable: polling again", zap.String("host", h.ID), tag.Error(err))
			case !notOwner:
				return nil
			}
		}
		if !c.waitForView(ctx, v, attempt, until) {
			return ctx.Err()
		}
	}
}

// waitForView waits until the view changes from v, a backoff passes (doubling from 50 ms to
// NotOwnerRetryMax), ctx ends or until (if set) comes. It reports whether to try again.
func (c *Client) waitForView(ctx context.Context, v *view, attempt int, until time.Time) bool {
	wait := min(50*time.Millisecond<<min(attempt, 10), c.opts.NotOwnerRetryMax)
	if !until.IsZero() {
		left := until.Sub(c.ts.Now())
		if left <= 0 {
			return false
		}
		wait = min(wait, left)
	}
	timerC, timer := c.ts.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-v.changed:
		return true
	case <-timerC:
		return until.IsZero() || c.ts.Now().Before(until)
	case <-ctx.Done():
		return false
	}
}

// remote returns the MatchingService client of host h, and counts the forwarded call.
func (c *Client) remote(h membership.Host, operation string) matchingpb.MatchingServiceClient {
	CallsForwarded.With(c.scope, metrics.OperationTag(operation)).Inc(1)
	return matchingpb.NewMatchingServiceClient(remoteConn{c: c, address: h.HistoryAddress})
}

// remoteConn dials lazily, so that a dial failure surfaces as the call's error.
type remoteConn struct {
	c       *Client
	address string
}

func (r remoteConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	conn, err := r.c.conn(r.address)
	if err != nil {
		return err
	}
	return conn.Invoke(ctx, method, args, reply, opts...)
}

func (r remoteConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	conn, err := r.c.conn(r.address)
	if err != nil {
		return nil, err
	}
	return conn.NewStream(ctx, desc, method, opts...)
}

func (c *Client) conn(address string) (*grpc.ClientConn, error) {
	if address == "" {
		return nil, serviceerror.NewUnavailable("the task queue's owner has no history address")
	}
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if conn, ok := c.conns[address]; ok {
		return conn, nil
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(statusToServiceError),
		// A long poll on a host that hangs without closing its connections would otherwise
		// wait for its whole deadline; pings find it dead within keepaliveTime+keepaliveTimeout,
		// and the poll moves on. The history server permits pings every 5 s.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true}),
	}, c.opts.DialOptions...)
	conn, err := grpc.NewClient(address, opts...)
	if err != nil {
		return nil, serviceerror.NewUnavailablef("dial matching host %s: %v", address, err)
	}
	c.conns[address] = conn
	return conn, nil
}

// closeStaleConns closes the connections to hosts that are in neither the previous view nor
// the new one. A host that just left keeps its connection for one more view: a call routed by
// the previous view may still be using it.
func (c *Client) closeStaleConns(prev, next *view) {
	live := make(map[string]bool, len(prev.hosts)+len(next.hosts))
	for _, h := range append(slices.Clone(prev.hosts), next.hosts...) {
		live[h.HistoryAddress] = true
	}
	c.connMu.Lock()
	defer c.connMu.Unlock()
	for address, conn := range c.conns {
		if !live[address] {
			_ = conn.Close()
			delete(c.conns, address)
		}
	}
}

// statusToServiceError turns statuses into serviceerror values, as history's router does.
func statusToServiceError(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return serviceerror.FromStatus(st)
	}
	return err
}

// isUnreachable reports whether a forwarded call failed because the owner is gone or going
// (connection refused, stopping, or its connection closed as it left the members): a
// membership change is due and the call may try again. Callers rule out their own
// cancellation first.
func isUnreachable(err error) bool {
	var (
		unavailable *serviceerror.Unavailable
		canceled    *serviceerror.Canceled
	)
	return errors.As(err, &unavailable) || errors.As(err, &canceled)
}

// fromServiceError turns a forwarded call's error back into the Matcher's error, so callers
// see the same errors whichever host served them.
func fromServiceError(err error) error {
	var (
		exhausted *serviceerror.ResourceExhausted
		invalid   *serviceerror.InvalidArgument
	)
	switch {
	case errors.As(err, &exhausted):
		return fmt.Errorf("%w: %s", ErrBacklogFull, exhausted.Message)
	case errors.As(err, &invalid):
		return fmt.Errorf("%w: %s", ErrInvalidArgument, invalid.Message)
	}
	return err
}
