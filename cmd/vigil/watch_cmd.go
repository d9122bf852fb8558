package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

func newWorkerWatchCmd(cf *clientFlags, out *outputFlags) *cobra.Command {
	var (
		query  string
		every  time.Duration
		cursor string
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print worker changes live",
		Long: `Print the namespace's workers (a snapshot), then every change as it commits, until
interrupted. A broken stream is reopened with the cursor of the last event printed, so
nothing is missed while the server still holds it (else the server says RESYNC and sends a
fresh snapshot). With -o json or jsonl: one WorkerEvent per line, with its cursor; with -o
yaml: one YAML document per event.`,
		Example: `  vigil worker watch
  vigil worker watch --query 'TaskQueue = "orders"'
  vigil worker watch -o jsonl --cursor 3-1842`,
		Args: noArgs,
		RunE: runner(func(cmd *cobra.Command, _ []string) error {
			return call(cmd, cf, out, func(ctx context.Context, c *clients, p *printer) error {
				return watchWorkers(cmd.Context(), c, p, cmd.ErrOrStderr(), query, cursor, every)
			})
		}),
	}
	cmd.Flags().StringVar(&query, "query", "", `ListWorkers query, e.g. 'TaskQueue = "orders"'`)
	cmd.Flags().DurationVar(&every, "heartbeat-every", 5*time.Second, "at most one HEARTBEAT event per worker per interval")
	cmd.Flags().StringVar(&cursor, "cursor", "", "resume after this cursor (printed with -o json)")
	return cmd
}

// watchWorkers prints WatchWorkers until ctx ends.
func watchWorkers(ctx context.Context, c *clients, p *printer, stderr io.Writer, query, cursor string, every time.Duration) error {
	last := cursor
	backoff := time.Second
	for {
		stream, err := c.liveness.WatchWorkers(ctx, &livenesspb.WatchWorkersRequest{
			Namespace: c.ns, Query: query, Cursor: last, HeartbeatEvery: durationpb.New(every),
		})
		for err == nil {
			var resp *livenesspb.WatchWorkersResponse
			if resp, err = stream.Recv(); err == nil {
				ev := resp.GetEvent()
				last = ev.GetCursor()
				backoff = time.Second
				if perr := printEvent(p, ev); perr != nil {
					return perr
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		switch status.Code(err) {
		case codes.InvalidArgument, codes.NotFound, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
			return err
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("stream ended")
		}
		fmt.Fprintf(stderr, "vigil: %s; reconnecting in %s\n", message(err), backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// printEvent prints one event: a line of text for table, else one document.
func printEvent(p *printer, ev *livenesspb.WorkerEvent) error {
	switch p.format {
	case formatTable:
		printEventText(p.w, ev)
		return nil
	case formatJSON:
		// A stream of objects: one per line, as jsonl.
		return (&printer{format: formatJSONL, w: p.w}).object(ev, nil)
	case formatYAML:
		if _, err := io.WriteString(p.w, "---\n"); err != nil {
			return err
		}
	}
	return p.object(ev, nil)
}

func printEventText(w io.Writer, ev *livenesspb.WorkerEvent) {
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
