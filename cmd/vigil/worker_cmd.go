package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

func newWorkerCmd(out *outputFlags) *cobra.Command {
	cf := newClientFlags()
	g := newGroup("worker", "List, describe and watch workers and their liveness",
		newWorkerListCmd(cf, out), newWorkerDescribeCmd(cf, out), newWorkerWatchCmd(cf, out))
	cf.register(g)
	return g
}

// stateValues are --state's values.
var stateValues = []string{"active", "inactive", "cleaned_up"}

func newWorkerListCmd(cf *clientFlags, out *outputFlags) *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List workers with their liveness (ACTIVE, INACTIVE, CLEANED_UP)",
		Long: `List the namespace's workers with their liveness state, lease, bound activities and
resurrections. While the expiry brake holds lease expiries back, a line on stderr says so.
With -o json, jsonl or yaml: the WorkerLiveness records.`,
		Example: `  vigil worker list
  vigil worker list --state inactive -o json`,
		Args: noArgs,
		RunE: runner(func(cmd *cobra.Command, _ []string) error {
			filter := livenesspb.LivenessState_LIVENESS_STATE_UNSPECIFIED
			if state != "" {
				v, ok := livenesspb.LivenessState_value["LIVENESS_STATE_"+strings.ToUpper(state)]
				if !ok {
					return usagef("unknown state %q (want %s)", state, strings.Join(stateValues, ", "))
				}
				filter = livenesspb.LivenessState(v)
			}
			return call(cmd, cf, out, func(ctx context.Context, c *clients, p *printer) error {
				workers, brake, err := listWorkers(cmd, cf, c, filter)
				if err != nil {
					return err
				}
				now := time.Now()
				err = list(p, workers, []string{"WORKER INSTANCE KEY", "STATE", "TASK QUEUE", "HOST", "IDENTITY", "LEASE / SINCE", "BOUND", "RESURRECTIONS"},
					func(w *livenesspb.WorkerLiveness) []string {
						hb := w.GetLastHeartbeat()
						return []string{w.GetWorkerInstanceKey(), stateName(w.GetState()), hb.GetTaskQueue(), hb.GetHostInfo().GetHostName(),
							hb.GetWorkerIdentity(), leaseColumn(w, now), fmt.Sprint(w.GetBoundActivityCount()), fmt.Sprint(w.GetResurrectionCount())}
					})
				if err != nil {
					return err
				}
				if brake.GetEngaged() {
					// Lease expiries are deferred: INACTIVE may be missing workers that are in fact gone.
					fmt.Fprintf(cmd.ErrOrStderr(), "expiry brake ON (%s) since %s: %d lease expiries held back\n",
						strings.Join(brake.GetReasons(), ", "), brake.GetSince().AsTime().Format(time.RFC3339), brake.GetHeldExpiries())
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&state, "state", "", "only workers in this state: "+strings.Join(stateValues, ", "))
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(stateValues, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// listWorkers reads every page of the namespace's workers.
func listWorkers(cmd *cobra.Command, cf *clientFlags, c *clients, filter livenesspb.LivenessState) ([]*livenesspb.WorkerLiveness, *livenesspb.ExpiryBrake, error) {
	var (
		token   []byte
		brake   *livenesspb.ExpiryBrake
		workers []*livenesspb.WorkerLiveness
	)
	for {
		ctx, cancel := cf.callContext(cmd.Context())
		resp, err := c.liveness.ListWorkerLiveness(ctx, &livenesspb.ListWorkerLivenessRequest{
			Namespace: c.ns, State: filter, PageSize: 500, NextPageToken: token,
		})
		cancel()
		if err != nil {
			return nil, nil, err
		}
		if brake == nil {
			brake = resp.GetExpiryBrake()
		}
		workers = append(workers, resp.GetWorkers()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return workers, brake, nil
		}
	}
}

func newWorkerDescribeCmd(cf *clientFlags, out *outputFlags) *cobra.Command {
	var bound, moved bool
	cmd := &cobra.Command{
		Use:   "describe WORKER_INSTANCE_KEY",
		Short: "Show one worker's liveness record",
		Long: `Show one worker's liveness record: state, lease, suspicion, inactive reason, cleanup, the
last heartbeat. --bound-activities adds the activities bound to it; --moved-activities adds
the activities its loss moved and where each is now. With -o json, jsonl or yaml: one
document, {"worker": ..., "expiryBrake": ..., "movedActivities": [...]}.`,
		Example: `  vigil worker describe 0f6c...e1 --bound-activities
  vigil worker describe 0f6c...e1 --moved-activities -o yaml`,
		Args:              exactArgs("WORKER_INSTANCE_KEY"),
		ValidArgsFunction: completeWorkerKeys(cf),
		RunE: runner(func(cmd *cobra.Command, args []string) error {
			return call(cmd, cf, out, func(ctx context.Context, c *clients, p *printer) error {
				resp, err := c.liveness.DescribeWorkerLiveness(ctx, &livenesspb.DescribeWorkerLivenessRequest{
					Namespace: c.ns, WorkerInstanceKey: args[0], IncludeBoundActivities: bound, IncludeMovedActivities: moved,
				})
				if err != nil {
					return err
				}
				return p.object(resp, func(w io.Writer) error { return describeWorkerTable(p, resp, moved, time.Now()) })
			})
		}),
	}
	cmd.Flags().BoolVar(&bound, "bound-activities", false, "include the activities bound to the worker")
	cmd.Flags().BoolVar(&moved, "moved-activities", false, "include the activities this worker's loss moved, and where they are now (scans the namespace's activities)")
	return cmd
}

// describeWorkerTable prints a worker's record as NAME VALUE rows, then its bound and moved
// activities as tables.
func describeWorkerTable(p *printer, resp *livenesspb.DescribeWorkerLivenessResponse, moved bool, now time.Time) error {
	w := resp.GetWorker()
	hb := w.GetLastHeartbeat()
	t := &table{}
	t.field("Worker instance key", w.GetWorkerInstanceKey())
	t.field("State", stateName(w.GetState()))
	t.field("Lease", leaseColumn(w, now))
	t.field("Lease deadline", timestamp(w.GetLeaseDeadline(), w.LeaseDeadline != nil))
	if w.LeaseDuration != nil {
		t.field("Lease duration", w.GetLeaseDuration().AsDuration().String())
	}
	t.field("Suspect since", timestamp(w.GetSuspectSince(), w.SuspectSince != nil))
	t.field("Suspect reason", w.GetSuspectReason())
	t.field("Suspect deadline", timestamp(w.GetSuspectDeadline(), w.SuspectDeadline != nil))
	if w.GetInactiveReason() != livenesspb.InactiveReason_INACTIVE_REASON_UNSPECIFIED {
		t.field("Inactive reason", strings.TrimPrefix(w.GetInactiveReason().String(), "INACTIVE_REASON_"))
	}
	t.field("Inactive since", timestamp(w.GetInactiveTime(), w.InactiveTime != nil))
	if w.GetState() == livenesspb.LivenessState_LIVENESS_STATE_CLEANED_UP {
		t.field("Cleaned up", timestamp(w.GetCleanupTime(), w.CleanupTime != nil))
	} else {
		t.field("Cleanup at", timestamp(w.GetCleanupTime(), w.CleanupTime != nil))
	}
	t.field("Task queue", hb.GetTaskQueue())
	t.field("Identity", hb.GetWorkerIdentity())
	t.field("Host", hb.GetHostInfo().GetHostName())
	t.field("SDK", strings.TrimSpace(hb.GetSdkName()+" "+hb.GetSdkVersion()))
	t.field("First heartbeat", timestamp(w.GetFirstHeartbeatTime(), w.FirstHeartbeatTime != nil))
	t.field("Last heartbeat", timestamp(w.GetLastHeartbeatTime(), w.LastHeartbeatTime != nil))
	t.field("Bound activities", fmt.Sprint(w.GetBoundActivityCount()))
	if n := w.GetPendingRescheduleActivities(); n > 0 {
		t.field("Pending reschedule", fmt.Sprint(n))
	}
	t.field("Resurrections", fmt.Sprint(w.GetResurrectionCount()))
	if w.GetDrainRequested() {
		t.field("Drain requested", "yes")
	}
	if b := resp.GetExpiryBrake(); b.GetEngaged() {
		t.field("Expiry brake", fmt.Sprintf("ON (%s) since %s, %d expiries held back",
			strings.Join(b.GetReasons(), ", "), timestamp(b.GetSince(), b.Since != nil), b.GetHeldExpiries()))
	}
	if err := p.writeTable(t); err != nil {
		return err
	}
	if bound := w.GetBoundActivities(); len(bound) > 0 {
		fmt.Fprintf(p.w, "\nBound activities: %d\n", len(bound))
		bt := &table{header: []string{"ACTIVITY ID", "RUN ID", "BOUND"}}
		for _, b := range bound {
			bt.row(b.GetActivityId(), b.GetRunId(), timestamp(b.GetBoundTime(), b.BoundTime != nil))
		}
		if err := p.writeTable(bt); err != nil {
			return err
		}
	}
	if moved {
		return printMovedActivities(p, resp.GetMovedActivities())
	}
	return nil
}

// printMovedActivities prints, after the worker's record, the activities its loss moved.
func printMovedActivities(p *printer, moved []*livenesspb.MovedActivity) error {
	fmt.Fprintf(p.w, "\nActivities this worker's loss moved: %d\n", len(moved))
	if len(moved) == 0 {
		return nil
	}
	t := &table{header: []string{"ACTIVITY ID", "RUN ID", "MOVED", "WHY", "STATUS", "ATTEMPT", "NOW ON"}}
	for _, m := range moved {
		status := m.GetStatus()
		if m.GetRunState() != "" {
			status += " (" + m.GetRunState() + ")"
		}
		now := "-"
		if m.GetWorkerInstanceKey() != "" {
			now = m.GetWorkerInstanceKey() + " " + m.GetWorkerIdentity()
		}
		t.row(m.GetActivityId(), m.GetRunId(), timestamp(m.GetMovedTime(), m.MovedTime != nil), m.GetReason(), status,
			fmt.Sprint(m.GetAttempt()), now)
	}
	return p.writeTable(t)
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
