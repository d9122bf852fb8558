package watch

import (
	"context"
	"sync"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// maxChangesPerResponse bounds a response of WatchChanges (a worker's state is up to a few
// KiB; a backlog of a full buffer goes out in several messages).
const maxChangesPerResponse = 256

// Server serves a history host's hub to the cluster's frontends (WorkerWatchService). It is
// registered on the history port, so it takes the cluster secret like every history RPC.
type Server struct {
	workerpb.UnimplementedWorkerWatchServiceServer
	hub *Hub

	stopOnce sync.Once
	stopping chan struct{}
	drain    bool
}

// NewServer serves hub.
func NewServer(hub *Hub) *Server {
	return &Server{hub: hub, stopping: make(chan struct{})}
}

// Stop ends every stream. With drain (a graceful stop, called once the host commits no more
// changes) each stream first sends what its watcher has not had yet, then says end: the
// frontend knows it lost nothing. Without (a crash), the streams just end.
func (s *Server) Stop(drain bool) {
	s.stopOnce.Do(func() {
		s.drain = drain
		close(s.stopping)
	})
}

// WatchChanges implements workerpb.WorkerWatchServiceServer.
func (s *Server) WatchChanges(req *workerpb.WatchChangesRequest, stream grpc.ServerStreamingServer[workerpb.WatchChangesResponse]) error {
	select {
	case <-s.stopping:
		// Its streams have ended: a new one would only send again what they sent.
		return serviceerror.NewUnavailable("the history host is stopping")
	default:
	}
	sub, position, resumed := s.hub.SubscribeLog(req.GetEpoch(), req.GetAfter())
	defer sub.Close()
	epoch := s.hub.Epoch()
	if err := stream.Send(&workerpb.WatchChangesResponse{Epoch: epoch, Resumed: resumed, Position: position}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	// send sends a batch of Next, whose cursor goes on its last response only: within a batch
	// a worker's heartbeat may stand in the place of an earlier one, so a part of a batch is no
	// point to resume after.
	send := func(events []Event, cursor uint64) error {
		for len(events) > 0 {
			n := min(len(events), maxChangesPerResponse)
			resp := &workerpb.WatchChangesResponse{Epoch: epoch, Changes: make([]*workerpb.WatchChange, n)}
			for i, ev := range events[:n] {
				resp.Changes[i] = EventToProto(ev)
			}
			if n == len(events) {
				resp.Cursor = cursor
			}
			if err := stream.Send(resp); err != nil {
				return err
			}
			events = events[n:]
		}
		return nil
	}
	for {
		events, cursor, overflow, err := sub.Next(ctx)
		if overflow {
			return stream.Send(&workerpb.WatchChangesResponse{Epoch: epoch, Overflow: true})
		}
		if err != nil {
			break
		}
		if err := send(events, cursor); err != nil {
			return err
		}
	}
	if stream.Context().Err() != nil {
		return stream.Context().Err()
	}
	if !s.drain {
		return serviceerror.NewUnavailable("the history host is stopping")
	}
	// Stopping gracefully: what is buffered is all there will be (Next returns it before
	// looking at the ended context).
	for {
		events, cursor, overflow, err := sub.Next(ctx)
		if overflow {
			return stream.Send(&workerpb.WatchChangesResponse{Epoch: epoch, Overflow: true})
		}
		if err != nil {
			return stream.Send(&workerpb.WatchChangesResponse{Epoch: epoch, End: true})
		}
		if err := send(events, cursor); err != nil {
			return err
		}
	}
}

// EventToProto is ev as WatchChanges sends it.
func EventToProto(ev Event) *workerpb.WatchChange {
	return &workerpb.WatchChange{
		Seq: ev.Seq, Time: timestamppb.New(ev.Time), Kind: uint32(ev.Kind), NamespaceId: ev.NamespaceID,
		WorkerInstanceKey: ev.WorkerInstanceKey, HostName: ev.HostName, State: ev.State, Count: ev.Count,
	}
}

// EventFromProto is the event WatchChanges sent as c.
func EventFromProto(c *workerpb.WatchChange) Event {
	return Event{
		Seq: c.GetSeq(), Time: c.GetTime().AsTime(), Kind: Kind(c.GetKind()), NamespaceID: c.GetNamespaceId(),
		WorkerInstanceKey: c.GetWorkerInstanceKey(), HostName: c.GetHostName(), State: c.GetState(), Count: c.GetCount(),
	}
}
