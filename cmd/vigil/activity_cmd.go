package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/vigilhq/vigil/frontend/query"
)

// activityCmd runs `vigil activity list|terminate`.
func activityCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "list":
			return activityList(args[1:], stdout, stderr)
		case "terminate":
			return activityTerminate(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintln(stderr, "usage: vigil activity list [--query Q] | vigil activity terminate ACTIVITY_ID [--run-id ID] [--reason R]")
	return 2
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
	fs := flag.NewFlagSet("vigil activity terminate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	runID := fs.String("run-id", "", "the run to terminate (default: the latest)")
	reason := fs.String("reason", "", "why; recorded in the activity's outcome")
	if err := fs.Parse(reorder(args)); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: vigil activity terminate ACTIVITY_ID [--run-id ID] [--reason R] [--namespace NS] [--address HOST:PORT]")
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
	_, err = workflowservice.NewWorkflowServiceClient(conn).TerminateActivityExecution(ctx, &workflowservice.TerminateActivityExecutionRequest{
		Namespace: *cf.namespace, ActivityId: fs.Arg(0), RunId: *runID, Reason: *reason, Identity: "vigil-cli",
	})
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	fmt.Fprintf(stdout, "activity %s terminated\n", fs.Arg(0))
	return 0
}
