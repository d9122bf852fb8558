package frontend

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workerapipb "go.temporal.io/api/worker/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/chasm/worker/watch"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/frontend/query"
)

// WatchHeartbeatEveryDefault is the HEARTBEAT coalescing interval of a watch that names none.
const WatchHeartbeatEveryDefault = 5 * time.Second

// WatchWorkers streams the namespace's workers: a snapshot, then committed changes.
func (h *LivenessHandler) WatchWorkers(req *livenesspb.WatchWorkersRequest, stream livenesspb.WorkerLivenessService_WatchWorkersServer) error {
	err := h.Watch(stream.Context(), req, func(ev *livenesspb.WorkerEvent) error {
		return stream.Send(&livenesspb.WatchWorkersResponse{Event: ev})
	})
	if err == nil {
		return nil
	}
	// Streams have no error interceptor: map here, as errorInterceptor does for unary calls.
	return toStatusError(err, h.deps.Logger, livenesspb.WorkerLivenessService_WatchWorkers_FullMethodName)
}

// cursor is a position in a hub's log: the event numbered seq of the hub made at epoch. It is
// sent as "<epoch>-<seq>" (opaque to clients).
type cursor struct{ epoch, seq uint64 }

func (c cursor) String() string {
	return strconv.FormatUint(c.epoch, 36) + "-" + strconv.FormatUint(c.seq, 36)
}

func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	e, q, ok := strings.Cut(s, "-")
	epoch, err1 := strconv.ParseUint(e, 36, 64)
	seq, err2 := strconv.ParseUint(q, 36, 64)
	if !ok || err1 != nil || err2 != nil || epoch == 0 {
		return cursor{}, serviceerror.NewInvalidArgument(fmt.Sprintf("cursor %q is not a cursor of WatchWorkers", s))
	}
	return cursor{epoch, seq}, nil
}

// Watch runs one watch, calling send for every event until ctx ends or send fails. Both the
// gRPC stream and the web page's Server-Sent Events use it.
func (h *LivenessHandler) Watch(ctx context.Context, req *livenesspb.WatchWorkersRequest, send func(*livenesspb.WorkerEvent) error) error {
	hub := h.deps.Watch
	if hub == nil {
		return serviceerror.NewUnimplemented("the live view is not enabled on this server")
	}
	ns, err := h.deps.Namespaces.GetByName(req.GetNamespace())
	if err != nil {
		return err
	}
	q, err := parseQuery(req.GetQuery())
	if err != nil {
		return err
	}
	every := WatchHeartbeatEveryDefault
	if d := req.GetHeartbeatEvery(); d != nil {
		if d.AsDuration() < 0 {
			return serviceerror.NewInvalidArgument("heartbeat_every must not be negative")
		}
		if d.AsDuration() > 0 {
			every = d.AsDuration()
		}
	}
	from, err := parseCursor(req.GetCursor())
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-h.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()

	scope := h.deps.MetricsScope
	open := metrics.WatchersOpen.With(scope)
	h.addWatchers(1, open)
	defer h.addWatchers(-1, open)
	sent := metrics.WatchEventsSent.With(scope)

	w := &watcher{ns: ns, query: func(r *workerpb.WorkerRecord) bool { return matchesQuery(q, r) }, shown: make(map[string]*workerpb.WorkerState), epoch: hub.Epoch()}
	emit := func(ev *livenesspb.WorkerEvent) error {
		sent.Inc(1)
		return send(ev)
	}
	sub, pos, ok := hub.Subscribe(ns.ID, from.epoch, from.seq, every)
	needSnapshot, resync := from.epoch == 0 || !ok, ""
	if !ok {
		resync = "the server no longer holds the events after this cursor"
	}
	for {
		if resync != "" {
			metrics.WatchResyncs.With(scope).Inc(1)
			// No cursor until SNAPSHOT_END: a stream broken during the snapshot starts over.
			if err := emit(&livenesspb.WorkerEvent{Type: livenesspb.WorkerEventType_WORKER_EVENT_TYPE_RESYNC,
				Time: timestamppb.New(h.deps.TimeSource.Now()), Reason: resync}); err != nil {
				sub.Close()
				return err
			}
		}
		if needSnapshot {
			w.shown = make(map[string]*workerpb.WorkerState)
			if err := h.snapshot(ctx, w, pos, emit); err != nil {
				sub.Close()
				return err
			}
		}
		overflow, err := w.follow(ctx, sub, emit)
		sub.Close()
		if !overflow {
			return err
		}
		// Fell behind its buffer, or the hub lost events of a history host: start over with a
		// fresh subscription and snapshot.
		resync = sub.ResyncReason()
		sub, pos, _ = hub.Subscribe(ns.ID, 0, 0, every)
		needSnapshot = true
	}
}

type watcher struct {
	ns    *namespace.Namespace
	query func(*workerpb.WorkerRecord) bool
	// shown: workers this watcher was told about that matched, with the state it was shown; a
	// worker that stops matching gets one more event (it leaves the view), then no more. An
	// event with an older state than the one shown (watch.Older: a change committed before the
	// snapshot read the worker, relayed after it) is not sent: a worker never goes back.
	shown  map[string]*workerpb.WorkerState
	epoch  uint64
	latest uint64
}

// snapshot sends every matching worker that is not CLEANED_UP, then SNAPSHOT_END with the
// cursor of the subscription's start. SNAPSHOT events carry no cursor: a client whose stream
// breaks before SNAPSHOT_END has an incomplete view, and must not resume it.
func (h *LivenessHandler) snapshot(ctx context.Context, w *watcher, pos uint64, emit func(*livenesspb.WorkerEvent) error) error {
	w.latest = pos
	c := cursor{w.epoch, pos}.String()
	now := timestamppb.New(h.deps.TimeSource.Now())
	var sendErr error
	err := scanWorkers(ctx, h.deps.History, w.ns, workerpb.WorkerStatus_WORKER_STATUS_UNSPECIFIED, func(record *workerpb.WorkerRecord) {
		if sendErr != nil || record.GetState().GetStatus() == workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP || !w.query(record) {
			return
		}
		wl := workerLiveness(record)
		w.shown[wl.GetWorkerInstanceKey()] = record.GetState()
		sendErr = emit(&livenesspb.WorkerEvent{Type: livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT, Time: now, Worker: wl,
			HostName: record.GetState().GetLastHeartbeat().GetHostInfo().GetHostName()})
	})
	if err = cmpErr(sendErr, err); err != nil {
		return err
	}
	return emit(&livenesspb.WorkerEvent{Type: livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT_END, Cursor: c, Time: now})
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// follow sends the subscription's events until ctx ends, send fails or the watcher overflows.
func (w *watcher) follow(ctx context.Context, sub *watch.Subscription, emit func(*livenesspb.WorkerEvent) error) (overflow bool, err error) {
	for {
		events, _, overflow, err := sub.Next(ctx)
		if err != nil || overflow {
			return overflow, err
		}
		for _, ev := range events {
			w.latest = max(w.latest, ev.Seq)
			out := w.convert(ev)
			if out == nil {
				continue
			}
			if err := emit(out); err != nil {
				return false, err
			}
		}
	}
}

// convert turns a hub event into the API's, or nil when the watcher's filter hides it.
func (w *watcher) convert(ev watch.Event) *livenesspb.WorkerEvent {
	out := &livenesspb.WorkerEvent{Cursor: cursor{w.epoch, w.latest}.String(), Time: timestamppb.New(ev.Time), HostName: ev.HostName}
	switch ev.Kind {
	case watch.KindHostOnline:
		out.Type = livenesspb.WorkerEventType_WORKER_EVENT_TYPE_HOST_ONLINE
		return out
	case watch.KindHostOffline:
		out.Type = livenesspb.WorkerEventType_WORKER_EVENT_TYPE_HOST_OFFLINE
		return out
	}
	record := &workerpb.WorkerRecord{WorkerInstanceKey: ev.WorkerInstanceKey, State: ev.State}
	matches := ev.Kind != watch.KindDeleted && w.query(record)
	shown := w.shown[ev.WorkerInstanceKey]
	if (!matches && shown == nil) || (shown != nil && watch.Older(ev.State, shown)) {
		return nil
	}
	if matches {
		w.shown[ev.WorkerInstanceKey] = ev.State
	} else {
		delete(w.shown, ev.WorkerInstanceKey)
	}
	out.Worker = workerLiveness(record)
	switch ev.Kind {
	case watch.KindRegistered:
		out.Type = livenesspb.WorkerEventType_WORKER_EVENT_TYPE_REGISTERED
	case watch.KindHeartbeat:
		out.Type = livenesspb.WorkerEventType_WORKER_EVENT_TYPE_HEARTBEAT
	case watch.KindInactive:
		out.Type = livenesspb.WorkerEventType_WORKER_EVENT_TYPE_INACTIVE
		out.InactiveReason = inactiveReason(ev.State.GetInactiveReason())
	case watch.KindResurrected:
		out.Type = livenesspb.WorkerEventType_WORKER_EVENT_TYPE_RESURRECTED
	case watch.KindCleanedUp:
		out.Type = livenesspb.WorkerEventType_WORKER_EVENT_TYPE_CLEANED_UP
	case watch.KindDeleted:
		out.Type = livenesspb.WorkerEventType_WORKER_EVENT_TYPE_DELETED
	case watch.KindDrainRequested:
		out.Type = livenesspb.WorkerEventType_WORKER_EVENT_TYPE_DRAIN_REQUESTED
	case watch.KindActivitiesRescheduled:
		out.Type = livenesspb.WorkerEventType_WORKER_EVENT_TYPE_ACTIVITIES_RESCHEDULED
		out.Count = ev.Count
	default:
		return nil
	}
	return out
}

// matchesQuery evaluates the ListWorkers query against a record in any state (a CLEANED_UP
// worker is matched as SHUTDOWN).
func matchesQuery(q *query.Query, record *workerpb.WorkerRecord) bool {
	hb, visible := publicHeartbeat(record)
	if !visible {
		hb = proto.CloneOf(record.GetState().GetLastHeartbeat())
		if hb == nil {
			hb = &workerapipb.WorkerHeartbeat{}
		}
		hb.WorkerInstanceKey = record.GetWorkerInstanceKey()
		hb.Status = enumspb.WORKER_STATUS_SHUTDOWN
	}
	return q.Matches(queryWorker(record, hb))
}
