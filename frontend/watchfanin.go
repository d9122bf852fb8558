package frontend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/chasm/worker/watch"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/membership"
)

// Fan-in timing: a broken host stream is reopened with backoff; a host that left the
// membership while its stream is still open gets watchLeaveGrace to finish sending.
const (
	watchRetryInitial = 100 * time.Millisecond
	watchRetryMax     = 2 * time.Second
	watchLeaveGrace   = 10 * time.Second
)

// WatchFanin feeds this frontend's hub (Deps.Watch) with the change log of every history host
// of the cluster: this host's own hub in process, every other member's over WorkerWatchService
// on its history port. It follows the membership: a host that joins is followed from the
// first event its log holds, a host that leaves is followed until its stream ends. Each host's
// stream is resumed by its own cursor (epoch, seq) after a break; whenever events may have
// been lost (a host that crashed or restarted, a cursor the host no longer holds), the hub
// records a Gap and every watcher resyncs.
type WatchFanin struct {
	hub     *watch.Hub
	local   *watch.Hub
	monitor membership.Monitor
	dial    func(address string) (grpc.ClientConnInterface, error)
	logger  *zap.Logger
	// leaveGrace is how long a host that left may still send on an open stream.
	leaveGrace time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	feeds map[string]*hostFeed // host ID →
	// cursors keeps where the last feed of a host stopped, for the next one (a host that left
	// and came back resumes where it was instead of sending its log again).
	cursors map[string]feedCursor
}

type feedCursor struct {
	epoch, seq uint64
	clean      bool
}

// hostFeed follows one host's log.
type hostFeed struct {
	host membership.Host
	// left is closed when the host is no longer a member.
	left     chan struct{}
	leftOnce sync.Once
	// ctx ends with the fan-in, or when the host came back and a new feed takes over from
	// this one's cursor (no gap: the new one resumes).
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func (h *hostFeed) leave() { h.leftOnce.Do(func() { close(h.left) }) }

func (h *hostFeed) hasLeft() bool {
	select {
	case <-h.left:
		return true
	default:
		return false
	}
}

// NewWatchFanin feeds hub from local (this process's history hub; nil when it has none) and
// every other member of monitor, reached through dial (history.Router.ConnForHost).
func NewWatchFanin(hub, local *watch.Hub, monitor membership.Monitor, dial func(address string) (grpc.ClientConnInterface, error), logger *zap.Logger) *WatchFanin {
	ctx, cancel := context.WithCancel(context.Background())
	return &WatchFanin{hub: hub, local: local, monitor: monitor, dial: dial, logger: logger, leaveGrace: watchLeaveGrace, ctx: ctx, cancel: cancel,
		feeds: make(map[string]*hostFeed), cursors: make(map[string]feedCursor)}
}

// Hub is the merged hub the watchers subscribe to.
func (f *WatchFanin) Hub() *watch.Hub { return f.hub }

// Start follows the current members and every change of the membership.
func (f *WatchFanin) Start() {
	changes, unsubscribe := f.monitor.Subscribe()
	f.sync()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer unsubscribe()
		for {
			select {
			case <-f.ctx.Done():
				return
			case <-changes:
				f.sync()
			}
		}
	}()
}

// Stop ends every feed.
func (f *WatchFanin) Stop() {
	f.cancel()
	f.wg.Wait()
}

// sync starts a feed for every member that has none (or whose feed saw it leave: it came
// back) and tells the feeds of hosts that left.
func (f *WatchFanin) sync() {
	members := f.monitor.Members()
	self := f.monitor.Self().ID
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx.Err() != nil {
		return
	}
	live := make(map[string]bool, len(members))
	for _, h := range members {
		live[h.ID] = true
		old, ok := f.feeds[h.ID]
		if ok && old.host.HistoryAddress == h.HistoryAddress && !old.hasLeft() {
			continue
		}
		ctx, cancel := context.WithCancel(f.ctx)
		feed := &hostFeed{host: h, left: make(chan struct{}), ctx: ctx, cancel: cancel, done: make(chan struct{})}
		f.feeds[h.ID] = feed
		var wait <-chan struct{}
		fresh := false
		switch {
		case !ok:
		case old.host.HistoryAddress == h.HistoryAddress:
			// It left and came back (a lapse of its membership): the new feed resumes from the
			// old one's cursor, once the old one has stopped.
			old.cancel()
			wait = old.done
		default:
			// Same ID at another address: a new process, read from its first event; the old
			// one's stream ends as a departed host's does.
			old.leave()
			fresh = true
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer close(feed.done)
			defer cancel()
			if wait != nil {
				<-wait
			}
			var start feedCursor
			if !fresh {
				f.mu.Lock()
				start = f.cursors[h.ID]
				f.mu.Unlock()
			}
			f.follow(feed, h.ID == self && f.local != nil, start)
			f.mu.Lock()
			if f.feeds[h.ID] == feed {
				delete(f.feeds, h.ID)
			}
			f.mu.Unlock()
		}()
	}
	for id, feed := range f.feeds {
		if !live[id] {
			feed.leave()
		}
	}
}

// logStream is an open subscription to one host's log.
type logStream interface {
	// recv returns the next events and the host's cursor after them (0: not a point to resume
	// after); end: the host stopped after sending all it had; overflow: the host dropped this
	// subscription's backlog.
	recv(ctx context.Context) (events []watch.Event, cursor uint64, end, overflow bool, err error)
	close()
}

// follow relays one host's log until the fan-in stops, or the host has left and its stream
// has ended. It returns having recorded a gap if events may have been lost.
func (f *WatchFanin) follow(feed *hostFeed, local bool, last feedCursor) {
	// epoch, seq: the cursor, up to which the host's log was relayed (epoch 0: none yet).
	// clean: nothing the host sent is unaccounted for: the last stream ended with the host's
	// end marker (a graceful stop), or the loss was recorded as a gap already; so the host may
	// leave without a gap, and a new process of it is read from its first event without one.
	epoch, seq, clean := last.epoch, last.seq, last.clean
	defer func() {
		f.mu.Lock()
		f.cursors[feed.host.ID] = feedCursor{epoch, seq, clean}
		f.mu.Unlock()
	}()
	stopped := func() bool { return feed.ctx.Err() != nil } // the fan-in stopped, or replaced
	backoff := watchRetryInitial
	logger := f.logger.With(zap.String("watch-host", feed.host.ID))
	for {
		stream, streamEpoch, position, resumed, err := f.open(feed, local, epoch, seq)
		if err == nil {
			if clean && streamEpoch != epoch && position == 0 {
				// The host stopped gracefully and came back: its new log, whole, follows.
				resumed = true
			}
			clean = false
			if !resumed {
				logger.Info("live view: events of a history host were lost; watchers resync")
				f.hub.Gap(fmt.Sprintf("events of history host %s were lost (it restarted, or the frontend fell behind it)", feed.host.ID))
			}
			epoch, seq = streamEpoch, position
			backoff = watchRetryInitial
			var end bool
			end, err = f.relay(feed, stream, &seq)
			stream.close()
			if end {
				// Graceful stop: nothing was lost. The cursor stays: the same process has
				// nothing more to send, a new one under the same address is read from its
				// first event.
				clean = true
				select {
				case <-feed.left:
					return
				default:
				}
			}
		}
		if stopped() {
			return
		}
		select {
		case <-feed.left:
			if !clean {
				logger.Info("live view: a history host left before its change stream ended", tag.Error(err))
				f.hub.Gap(fmt.Sprintf("history host %s left the cluster and some of its events may be lost", feed.host.ID))
				clean = true
			}
			return
		default:
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			logger.Debug("live view: change stream broken; reopening", tag.Error(err))
		}
		select {
		case <-feed.ctx.Done():
			return
		case <-feed.left:
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchRetryMax)
	}
}

// relay copies a stream's events to the hub, advancing seq, until the stream ends.
func (f *WatchFanin) relay(feed *hostFeed, stream logStream, seq *uint64) (end bool, err error) {
	ctx, cancel := context.WithCancel(feed.ctx)
	defer cancel()
	go func() {
		// A host that left gets a grace to finish: its shards' new owners are reporting already.
		select {
		case <-ctx.Done():
			return
		case <-feed.left:
		}
		select {
		case <-ctx.Done():
		case <-time.After(f.leaveGrace):
			cancel()
		}
	}()
	for {
		events, cursor, end, overflow, err := stream.recv(ctx)
		// Every event up to the cursor was relayed already: a stream resumes after it, so this
		// only guards against a host that sends an event again.
		events = slices.DeleteFunc(events, func(ev watch.Event) bool { return ev.Seq <= *seq })
		if len(events) > 0 {
			f.hub.Relay(events...)
		}
		if cursor > 0 {
			*seq = cursor
		}
		switch {
		case err != nil:
			return false, err
		case end:
			return true, nil
		case overflow:
			return false, errors.New("the host dropped the backlog of this frontend's stream")
		}
	}
}

// open subscribes to the host's log after (epoch, seq); it returns the log's epoch and the
// number of the event before the first it sends.
func (f *WatchFanin) open(feed *hostFeed, local bool, epoch, seq uint64) (stream logStream, streamEpoch, position uint64, resumed bool, err error) {
	if local {
		sub, position, resumed := f.local.SubscribeLog(epoch, seq)
		return localLog{sub}, f.local.Epoch(), position, resumed, nil
	}
	conn, err := f.dial(feed.host.HistoryAddress)
	if err != nil {
		return nil, 0, 0, false, err
	}
	ctx, cancel := context.WithCancel(feed.ctx)
	client, err := workerpb.NewWorkerWatchServiceClient(conn).WatchChanges(ctx, &workerpb.WatchChangesRequest{Epoch: epoch, After: seq})
	if err != nil {
		cancel()
		return nil, 0, 0, false, err
	}
	first, err := client.Recv()
	if err != nil {
		cancel()
		return nil, 0, 0, false, err
	}
	return &remoteLog{stream: client, cancel: cancel}, first.GetEpoch(), first.GetPosition(), first.GetResumed(), nil
}

type localLog struct{ sub *watch.Subscription }

func (l localLog) recv(ctx context.Context) ([]watch.Event, uint64, bool, bool, error) {
	events, cursor, overflow, err := l.sub.Next(ctx)
	return events, cursor, false, overflow, err
}

func (l localLog) close() { l.sub.Close() }

type remoteLog struct {
	stream grpc.ServerStreamingClient[workerpb.WatchChangesResponse]
	cancel context.CancelFunc
}

func (r *remoteLog) recv(ctx context.Context) ([]watch.Event, uint64, bool, bool, error) {
	stop := context.AfterFunc(ctx, r.cancel)
	defer stop()
	resp, err := r.stream.Recv()
	if errors.Is(err, io.EOF) {
		err = errors.New("the change stream ended without its end marker")
	}
	if err != nil {
		return nil, 0, false, false, err
	}
	events := make([]watch.Event, len(resp.GetChanges()))
	for i, c := range resp.GetChanges() {
		events[i] = watch.EventFromProto(c)
	}
	return events, resp.GetCursor(), resp.GetEnd(), resp.GetOverflow(), nil
}

func (r *remoteLog) close() { r.cancel() }
