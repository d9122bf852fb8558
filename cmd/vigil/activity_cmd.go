package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/vigilhq/vigil/frontend/query"
)

const activityUsage = `usage: vigil activity list [--query Q]
       vigil activity describe ACTIVITY_ID [--run-id ID] [--output table|json]
       vigil activity cancel ACTIVITY_ID [--run-id ID] [--reason R]
       vigil activity terminate ACTIVITY_ID [--run-id ID] [--reason R]`

// activityCmd runs `vigil activity list|describe|cancel|terminate`.
func activityCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "list":
			return activityList(args[1:], stdout, stderr)
		case "describe":
			return activityDescribe(args[1:], stdout, stderr)
		case "cancel":
			return activityCancel(args[1:], stdout, stderr)
		case "terminate":
			return activityTerminate(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintln(stderr, activityUsage)
	return 2
}

func activityDescribe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil activity describe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	runID := fs.String("run-id", "", "the run to describe (default: the latest)")
	output := fs.String("output", "table", "table or json")
	if err := fs.Parse(reorder(args)); err != nil {
		return 2
	}
	if fs.NArg() != 1 || (*output != "table" && *output != "json") {
		fmt.Fprintln(stderr, "usage: vigil activity describe ACTIVITY_ID [--run-id ID] [--output table|json] [--namespace NS] [--address HOST:PORT]")
		return 2
	}
	conn, err := cf.conn()
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := workflowservice.NewWorkflowServiceClient(conn).DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{
		Namespace: *cf.namespace, ActivityId: fs.Arg(0), RunId: *runID,
		IncludeHeartbeatDetails: true, IncludeLastFailure: true, IncludeOutcome: true,
	})
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	if *output == "json" {
		b, err := protojson.MarshalOptions{Multiline: true}.Marshal(resp)
		if err != nil {
			fmt.Fprintln(stderr, "vigil:", err)
			return 1
		}
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	info := resp.GetInfo()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	row := func(name, value string) {
		if value != "" {
			fmt.Fprintf(tw, "%s\t%s\n", name, value)
		}
	}
	when := func(ts interface{ AsTime() time.Time }, set bool) string {
		if !set {
			return ""
		}
		return ts.AsTime().Format(time.RFC3339Nano)
	}
	row("Activity ID", info.GetActivityId())
	row("Run ID", resp.GetRunId())
	row("Type", info.GetActivityType().GetName())
	row("Task queue", info.GetTaskQueue())
	row("Status", query.ActivityStatusName(info.GetStatus()))
	if info.GetStatus() == enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING {
		row("Run state", info.GetRunState().String())
	}
	row("Attempt", fmt.Sprint(info.GetAttempt()))
	row("Worker", info.GetLastWorkerIdentity())
	row("Scheduled", when(info.GetScheduleTime(), info.GetScheduleTime() != nil))
	row("Last started", when(info.GetLastStartedTime(), info.GetLastStartedTime() != nil))
	row("Last heartbeat", when(info.GetLastHeartbeatTime(), info.GetLastHeartbeatTime() != nil))
	row("Next attempt", when(info.GetNextAttemptScheduleTime(), info.GetNextAttemptScheduleTime() != nil))
	row("Expires", when(info.GetExpirationTime(), info.GetExpirationTime() != nil))
	row("Closed", when(info.GetCloseTime(), info.GetCloseTime() != nil))
	for _, d := range []struct {
		name  string
		value interface{ AsDuration() time.Duration }
		set   bool
	}{
		{"Schedule-to-close", info.GetScheduleToCloseTimeout(), info.GetScheduleToCloseTimeout() != nil},
		{"Schedule-to-start", info.GetScheduleToStartTimeout(), info.GetScheduleToStartTimeout() != nil},
		{"Start-to-close", info.GetStartToCloseTimeout(), info.GetStartToCloseTimeout() != nil},
		{"Heartbeat timeout", info.GetHeartbeatTimeout(), info.GetHeartbeatTimeout() != nil},
	} {
		if d.set {
			row(d.name, d.value.AsDuration().String())
		}
	}
	if p := info.GetRetryPolicy(); p != nil {
		attempts := "unlimited"
		if p.GetMaximumAttempts() > 0 {
			attempts = fmt.Sprint(p.GetMaximumAttempts())
		}
		row("Retry", fmt.Sprintf("initial %s, x%g, max interval %s, attempts %s",
			p.GetInitialInterval().AsDuration(), p.GetBackoffCoefficient(), p.GetMaximumInterval().AsDuration(), attempts))
	}
	row("Canceled reason", info.GetCanceledReason())
	row("Last failure", info.GetLastFailure().GetMessage())
	if o := resp.GetOutcome(); o != nil {
		if f := o.GetFailure(); f != nil {
			row("Outcome", "failure: "+f.GetMessage())
		} else {
			row("Outcome", fmt.Sprintf("result (%d payloads)", len(o.GetResult().GetPayloads())))
		}
	}
	_ = tw.Flush()
	return 0
}

func activityCancel(args []string, stdout, stderr io.Writer) int {
	return activityRunCommand("cancel", "why; the worker sees it", args, stdout, stderr,
		func(ctx context.Context, c workflowservice.WorkflowServiceClient, namespace, id, runID, reason string) (string, error) {
			_, err := c.RequestCancelActivityExecution(ctx, &workflowservice.RequestCancelActivityExecutionRequest{
				Namespace: namespace, ActivityId: id, RunId: runID, Reason: reason, Identity: "vigil-cli",
				RequestId: uuid.NewString(),
			})
			// A waiting activity is canceled at once; a running one when its worker acknowledges.
			return fmt.Sprintf("cancellation of activity %s requested", id), err
		})
}

// activityRunCommand runs a command on one run of an activity (ID, --run-id, --reason) and
// prints what call answers.
func activityRunCommand(verb, reasonHelp string, args []string, stdout, stderr io.Writer,
	call func(ctx context.Context, c workflowservice.WorkflowServiceClient, namespace, id, runID, reason string) (string, error),
) int {
	fs := flag.NewFlagSet("vigil activity "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	runID := fs.String("run-id", "", "the run to "+verb+" (default: the latest)")
	reason := fs.String("reason", "", reasonHelp)
	if err := fs.Parse(reorder(args)); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "usage: vigil activity %s ACTIVITY_ID [--run-id ID] [--reason R] [--namespace NS] [--address HOST:PORT]\n", verb)
		return 2
	}
	conn, err := cf.conn()
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done, err := call(ctx, workflowservice.NewWorkflowServiceClient(conn), *cf.namespace, fs.Arg(0), *runID, *reason)
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	fmt.Fprintln(stdout, done)
	return 0
}

func activityList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil activity list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	q := fs.String("query", "", "only activities matching this query; columns: "+fmt.Sprint(query.ActivityColumns()))
	if err := fs.Parse(args); err != nil {
		return 2
	}
	conn, err := cf.conn()
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	defer func() { _ = conn.Close() }()
	client := workflowservice.NewWorkflowServiceClient(conn)

	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTIVITY ID\tRUN ID\tTYPE\tTASK QUEUE\tSTATUS\tSCHEDULED\tCLOSED")
	var token []byte
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := client.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{
			Namespace: *cf.namespace, Query: *q, PageSize: 500, NextPageToken: token,
		})
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, "vigil:", err)
			return 1
		}
		for _, a := range resp.GetExecutions() {
			closed := "-"
			if a.GetCloseTime() != nil {
				closed = a.GetCloseTime().AsTime().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.GetActivityId(), a.GetRunId(), a.GetActivityType().GetName(),
				a.GetTaskQueue(), query.ActivityStatusName(a.GetStatus()), a.GetScheduleTime().AsTime().Format(time.RFC3339), closed)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	_ = tw.Flush()
	return 0
}

func activityTerminate(args []string, stdout, stderr io.Writer) int {
	return activityRunCommand("terminate", "why; recorded in the activity's outcome", args, stdout, stderr,
		func(ctx context.Context, c workflowservice.WorkflowServiceClient, namespace, id, runID, reason string) (string, error) {
			_, err := c.TerminateActivityExecution(ctx, &workflowservice.TerminateActivityExecutionRequest{
				Namespace: namespace, ActivityId: id, RunId: runID, Reason: reason, Identity: "vigil-cli",
			})
			return fmt.Sprintf("activity %s terminated", id), err
		})
}
