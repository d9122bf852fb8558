package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

func workerList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil worker list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	state := fs.String("state", "", "only workers in this state: active, inactive or cleaned_up")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	filter := livenesspb.LivenessState_LIVENESS_STATE_UNSPECIFIED
	if *state != "" {
		v, ok := livenesspb.LivenessState_value["LIVENESS_STATE_"+strings.ToUpper(*state)]
		if !ok {
			fmt.Fprintf(stderr, "vigil: unknown state %q (want active, inactive or cleaned_up)\n", *state)
			return 2
		}
		filter = livenesspb.LivenessState(v)
	}
	client, closeConn, err := cf.dial()
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	defer closeConn()

	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER INSTANCE KEY\tSTATE\tTASK QUEUE\tHOST\tIDENTITY\tLEASE / SINCE\tBOUND\tRESURRECTIONS")
	var token []byte
	var brake *livenesspb.ExpiryBrake
	now := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := client.ListWorkerLiveness(ctx, &livenesspb.ListWorkerLivenessRequest{
			Namespace: *cf.namespace, State: filter, PageSize: 500, NextPageToken: token,
		})
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, "vigil:", err)
			return 1
		}
		if brake == nil {
			brake = resp.GetExpiryBrake()
		}
		for _, w := range resp.GetWorkers() {
			hb := w.GetLastHeartbeat()
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", w.GetWorkerInstanceKey(), stateName(w.GetState()),
				hb.GetTaskQueue(), hb.GetHostInfo().GetHostName(), hb.GetWorkerIdentity(), leaseColumn(w, now),
				w.GetBoundActivityCount(), w.GetResurrectionCount())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	_ = tw.Flush()
	if brake.GetEngaged() {
		// Lease expiries are deferred: INACTIVE may be missing workers that are in fact gone.
		fmt.Fprintf(stdout, "\nexpiry brake ON (%s) since %s: %d lease expiries held back\n",
			strings.Join(brake.GetReasons(), ", "), brake.GetSince().AsTime().Format(time.RFC3339), brake.GetHeldExpiries())
	}
	return 0
}

func workerDescribe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil worker describe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	bound := fs.Bool("bound-activities", false, "include the bound activities")
	moved := fs.Bool("moved-activities", false, "also list the activities this worker's loss moved, and where they are now (scans the namespace's activities)")
	if err := fs.Parse(reorder(args)); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: vigil worker describe WORKER_INSTANCE_KEY [--bound-activities] [--moved-activities] [--namespace NS] [--address HOST:PORT]")
		return 2
	}
	client, closeConn, err := cf.dial()
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.DescribeWorkerLiveness(ctx, &livenesspb.DescribeWorkerLivenessRequest{
		Namespace: *cf.namespace, WorkerInstanceKey: fs.Arg(0), IncludeBoundActivities: *bound, IncludeMovedActivities: *moved,
	})
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	out, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(resp.GetWorker())
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	fmt.Fprintln(stdout, string(out))
	if *moved {
		printMovedActivities(stdout, resp.GetMovedActivities())
	}
	return 0
}

// printMovedActivities prints, after the worker's record, the activities its loss moved.
func printMovedActivities(w io.Writer, moved []*livenesspb.MovedActivity) {
	fmt.Fprintf(w, "\nActivities this worker's loss moved: %d\n", len(moved))
	if len(moved) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTIVITY ID\tRUN ID\tMOVED\tWHY\tSTATUS\tATTEMPT\tNOW ON")
	for _, m := range moved {
		status := m.GetStatus()
		if m.GetRunState() != "" {
			status += " (" + m.GetRunState() + ")"
		}
		now := "-"
		if m.GetWorkerInstanceKey() != "" {
			now = m.GetWorkerInstanceKey() + " " + m.GetWorkerIdentity()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", m.GetActivityId(), m.GetRunId(),
			m.GetMovedTime().AsTime().Format(time.RFC3339), m.GetReason(), status, m.GetAttempt(), now)
	}
	_ = tw.Flush()
}

// reorder moves flags before the positional argument, so "describe KEY --namespace x" works.
func reorder(args []string) []string {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
			if !strings.Contains(a, "=") && !boolFlags[strings.TrimLeft(a, "-")] && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		positional = append(positional, a)
	}
	return append(flags, positional...)
}

func stateName(s livenesspb.LivenessState) string {
	return strings.TrimPrefix(s.String(), "LIVENESS_STATE_")
}

func leaseColumn(w *livenesspb.WorkerLiveness, now time.Time) string {
	switch w.GetState() {
	case livenesspb.LivenessState_LIVENESS_STATE_ACTIVE:
		if w.GetSuspectDeadline() != nil {
			// Connection suspicion: its connections closed; it ends at the suspect deadline
			// unless it polls or heartbeats first.
			return fmt.Sprintf("SUSPECT (%s %s ago), expires in %s", w.GetSuspectReason(),
				now.Sub(w.GetSuspectSince().AsTime()).Round(100*time.Millisecond),
				w.GetSuspectDeadline().AsTime().Sub(now).Round(100*time.Millisecond))
		}
		return "expires in " + w.GetLeaseDeadline().AsTime().Sub(now).Round(100*time.Millisecond).String()
	case livenesspb.LivenessState_LIVENESS_STATE_INACTIVE:
		return fmt.Sprintf("%s %s ago", strings.ToLower(strings.TrimPrefix(w.GetInactiveReason().String(), "INACTIVE_REASON_")),
			now.Sub(w.GetInactiveTime().AsTime()).Round(time.Second))
	}
	return "cleaned up " + now.Sub(w.GetCleanupTime().AsTime()).Round(time.Second).String() + " ago"
}

// boolFlags take no value, so reorder must not take the next argument as theirs.
var boolFlags = map[string]bool{"bound-activities": true, "moved-activities": true, "tls": true, "all-namespaces": true}
