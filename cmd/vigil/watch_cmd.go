package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

// signalContext ends on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// workerWatch prints WatchWorkers live until ctx ends. A broken stream is reopened with the
// cursor of the last event printed, so nothing is missed while the server still holds it (the
// server says RESYNC and sends a fresh snapshot when it does not).
func workerWatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil worker watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	query := fs.String("query", "", `ListWorkers query, e.g. 'TaskQueue = "orders"'`)
	output := fs.String("output", "text", "text or json (one JSON event per line)")
	every := fs.Duration("heartbeat-every", 5*time.Second, "at most one HEARTBEAT per worker per interval")
	cursor := fs.String("cursor", "", "resume after this cursor (printed with -output json)")
	if err := fs.Parse(reorder(args)); err != nil {
		return 2
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "vigil: unknown output %q (want text or json)\n", *output)
		return 2
	}
	client, closeConn, err := cf.dial()
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	defer closeConn()

	last := *cursor
	backoff := time.Second
	for {
		stream, err := client.WatchWorkers(ctx, &livenesspb.WatchWorkersRequest{
			Namespace: *cf.namespace, Query: *query, Cursor: last, HeartbeatEvery: durationpb.New(*every),
		})
		for err == nil {
			var resp *livenesspb.WatchWorkersResponse
			if resp, err = stream.Recv(); err == nil {
				ev := resp.GetEvent()
				last = ev.GetCursor()
				backoff = time.Second
				printEvent(stdout, ev, *output == "json")
			}
		}
		if ctx.Err() != nil {
			return 0
		}
		switch status.Code(err) {
		case codes.InvalidArgument, codes.NotFound, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
			fmt.Fprintln(stderr, "vigil:", status.Convert(err).Message())
			return 1
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("stream ended")
		}
		fmt.Fprintf(stderr, "vigil: %v; reconnecting in %s\n", err, backoff)
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func printEvent(w io.Writer, ev *livenesspb.WorkerEvent, asJSON bool) {
	if asJSON {
		data, _ := protojson.Marshal(ev)
		fmt.Fprintln(w, string(data))
		return
	}
	kind := strings.TrimPrefix(ev.GetType().String(), "WORKER_EVENT_TYPE_")
	at := ev.GetTime().AsTime().Local().Format("15:04:05.000")
	switch ev.GetType() {
	case livenesspb.WorkerEventType_WORKER_EVENT_TYPE_HOST_ONLINE, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_HOST_OFFLINE:
		fmt.Fprintf(w, "%s  %-22s host=%s\n", at, kind, ev.GetHostName())
		return
	case livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT_END:
		fmt.Fprintf(w, "%s  %-22s (live from here)\n", at, kind)
		return
	case livenesspb.WorkerEventType_WORKER_EVENT_TYPE_RESYNC:
		fmt.Fprintf(w, "%s  %-22s %s\n", at, kind, ev.GetReason())
		return
	}
	wl := ev.GetWorker()
	hb := wl.GetLastHeartbeat()
	// The lease as it stood at the event, not at printing (a resumed stream replays).
	extra := " lease=" + strings.TrimPrefix(leaseColumn(wl, ev.GetTime().AsTime()), "expires in ")
	switch ev.GetType() {
	case livenesspb.WorkerEventType_WORKER_EVENT_TYPE_INACTIVE:
		extra = " reason=" + strings.TrimPrefix(ev.GetInactiveReason().String(), "INACTIVE_REASON_")
	case livenesspb.WorkerEventType_WORKER_EVENT_TYPE_ACTIVITIES_RESCHEDULED:
		extra = fmt.Sprintf(" activities=%d", ev.GetCount())
	}
	if wl.GetState() != livenesspb.LivenessState_LIVENESS_STATE_ACTIVE && ev.GetType() != livenesspb.WorkerEventType_WORKER_EVENT_TYPE_INACTIVE &&
		ev.GetType() != livenesspb.WorkerEventType_WORKER_EVENT_TYPE_ACTIVITIES_RESCHEDULED {
		extra = " (" + leaseColumn(wl, ev.GetTime().AsTime()) + ")"
	}
	fmt.Fprintf(w, "%s  %-22s %s state=%s host=%s task-queue=%s identity=%s bound=%d%s\n", at, kind,
		wl.GetWorkerInstanceKey(), stateName(wl.GetState()), hb.GetHostInfo().GetHostName(), hb.GetTaskQueue(),
		hb.GetWorkerIdentity(), wl.GetBoundActivityCount(), extra)
}
