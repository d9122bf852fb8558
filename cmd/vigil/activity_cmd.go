package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	activitypb "go.temporal.io/api/activity/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/vigilhq/vigil/frontend/query"
)

func newActivityCmd(out *outputFlags) *cobra.Command {
	cf := newClientFlags()
	g := newGroup("activity", "List, describe, cancel and terminate standalone activities",
		newActivityListCmd(cf, out), newActivityDescribeCmd(cf, out),
		newActivityRunCmd(cf, "cancel", "Request a standalone activity's cancellation",
			"Request a standalone activity's cancellation: a waiting activity is canceled at once, a\nrunning one when its worker acknowledges.",
			"why; the worker sees it",
			func(ctx context.Context, c *clients, id, runID, reason string) (string, error) {
				_, err := c.workflow.RequestCancelActivityExecution(ctx, &workflowservice.RequestCancelActivityExecutionRequest{
					Namespace: c.ns, ActivityId: id, RunId: runID, Reason: reason, Identity: "vigil-cli",
					RequestId: uuid.NewString(),
				})
				return fmt.Sprintf("cancellation of activity %s requested", id), err
			}),
		newActivityRunCmd(cf, "terminate", "Terminate a standalone activity at once",
			"Terminate a standalone activity at once; its worker's late result is refused.",
			"why; recorded in the activity's outcome",
			func(ctx context.Context, c *clients, id, runID, reason string) (string, error) {
				_, err := c.workflow.TerminateActivityExecution(ctx, &workflowservice.TerminateActivityExecutionRequest{
					Namespace: c.ns, ActivityId: id, RunId: runID, Reason: reason, Identity: "vigil-cli",
				})
				return fmt.Sprintf("activity %s terminated", id), err
			}),
	)
	cf.register(g)
	return g
}

func newActivityListCmd(cf *clientFlags, out *outputFlags) *cobra.Command {
	var q string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List standalone activities",
		Long: `List the namespace's standalone activities, optionally filtered by a query over the
columns ` + fmt.Sprint(query.ActivityColumns()) + `.
With -o json, jsonl or yaml: the ActivityExecutionListInfo records.`,
		Example: `  vigil activity list
  vigil activity list --query 'ExecutionStatus = "Running" AND TaskQueue = "payments"' -o jsonl`,
		Args: noArgs,
		RunE: runner(func(cmd *cobra.Command, _ []string) error {
			return call(cmd, cf, out, func(ctx context.Context, c *clients, p *printer) error {
				var items []*activitypb.ActivityExecutionListInfo
				var token []byte
				for {
					ctx, cancel := cf.callContext(cmd.Context())
					resp, err := c.workflow.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{
						Namespace: c.ns, Query: q, PageSize: 500, NextPageToken: token,
					})
					cancel()
					if err != nil {
						return err
					}
					items = append(items, resp.GetExecutions()...)
					if token = resp.GetNextPageToken(); len(token) == 0 {
						break
					}
				}
				return list(p, items, []string{"ACTIVITY ID", "RUN ID", "TYPE", "TASK QUEUE", "STATUS", "SCHEDULED", "CLOSED"},
					func(a *activitypb.ActivityExecutionListInfo) []string {
						return []string{a.GetActivityId(), a.GetRunId(), a.GetActivityType().GetName(), a.GetTaskQueue(),
							query.ActivityStatusName(a.GetStatus()), timestamp(a.GetScheduleTime(), a.ScheduleTime != nil),
							orDash(timestamp(a.GetCloseTime(), a.CloseTime != nil))}
					})
			})
		}),
	}
	cmd.Flags().StringVar(&q, "query", "", "only activities matching this query")
	return cmd
}

func newActivityDescribeCmd(cf *clientFlags, out *outputFlags) *cobra.Command {
	var runID string
	cmd := &cobra.Command{
		Use:   "describe ACTIVITY_ID",
		Short: "Show a standalone activity (state, attempt, worker, options)",
		Long: `Show a standalone activity: status, run state, attempt, its last worker, times, timeouts,
retry policy, last failure and outcome. With -o json, jsonl or yaml: the
DescribeActivityExecutionResponse, heartbeat details, last failure and outcome included.`,
		Example: `  vigil activity describe order-42
  vigil activity describe order-42 -o json`,
		Args:              exactArgs("ACTIVITY_ID"),
		ValidArgsFunction: completeActivityIDs(cf, false),
		RunE: runner(func(cmd *cobra.Command, args []string) error {
			return call(cmd, cf, out, func(ctx context.Context, c *clients, p *printer) error {
				resp, err := c.workflow.DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{
					Namespace: c.ns, ActivityId: args[0], RunId: runID,
					IncludeHeartbeatDetails: true, IncludeLastFailure: true, IncludeOutcome: true,
				})
				if err != nil {
					return err
				}
				return p.object(resp, func(io.Writer) error { return p.writeTable(activityTable(resp)) })
			})
		}),
	}
	cmd.Flags().StringVar(&runID, "run-id", "", "the run to describe (default: the latest)")
	return cmd
}

// activityTable is a described activity as NAME VALUE rows.
func activityTable(resp *workflowservice.DescribeActivityExecutionResponse) *table {
	info := resp.GetInfo()
	t := &table{}
	row := t.field
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
	return t
}

// newActivityRunCmd makes a command that acts on one run of an activity (ID, --run-id,
// --reason) and prints what call answers.
func newActivityRunCmd(cf *clientFlags, verb, short, long, reasonHelp string,
	call func(ctx context.Context, c *clients, id, runID, reason string) (string, error),
) *cobra.Command {
	var runID, reason string
	cmd := &cobra.Command{
		Use:               verb + " ACTIVITY_ID",
		Short:             short,
		Long:              long,
		Args:              exactArgs("ACTIVITY_ID"),
		ValidArgsFunction: completeActivityIDs(cf, true),
		RunE: runner(func(cmd *cobra.Command, args []string) error {
			c, err := cf.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := cf.callContext(cmd.Context())
			defer cancel()
			done, err := call(ctx, c, args[0], runID, reason)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), done)
			return err
		}),
	}
	cmd.Flags().StringVar(&runID, "run-id", "", "the run to "+verb+" (default: the latest)")
	cmd.Flags().StringVar(&reason, "reason", "", reasonHelp)
	return cmd
}
