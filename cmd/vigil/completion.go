package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/workflowservice/v1"

	adminpb "github.com/vigilhq/vigil/api/gen/adminpb/v1"
	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/frontend/query"
)

// completionTimeout bounds a completion's call to the server: a shell waits for it.
const completionTimeout = 3 * time.Second

// completeFromServer completes the first argument with what list returns from the server the
// command's flags point at (the flags typed so far count); nothing when it cannot be reached.
func completeFromServer(cf *clientFlags, list func(ctx context.Context, c *clients) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := cf.dial()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(cmd.Context(), min(cf.timeout, completionTimeout))
		defer cancel()
		items, err := list(ctx, c)
		if err != nil {
			cobra.CompDebugln("vigil: "+message(err), false)
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, it := range items {
			if strings.HasPrefix(it, toComplete) {
				out = append(out, it)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeWorkerKeys completes worker instance keys, described by state, task queue and
// identity.
func completeWorkerKeys(cf *clientFlags) cobra.CompletionFunc {
	return completeFromServer(cf, func(ctx context.Context, c *clients) ([]string, error) {
		var out []string
		var token []byte
		for {
			resp, err := c.liveness.ListWorkerLiveness(ctx, &livenesspb.ListWorkerLivenessRequest{Namespace: c.ns, PageSize: 500, NextPageToken: token})
			if err != nil {
				return nil, err
			}
			for _, w := range resp.GetWorkers() {
				hb := w.GetLastHeartbeat()
				out = append(out, cobra.CompletionWithDesc(w.GetWorkerInstanceKey(),
					fmt.Sprintf("%s %s %s", stateName(w.GetState()), hb.GetTaskQueue(), hb.GetWorkerIdentity())))
			}
			if token = resp.GetNextPageToken(); len(token) == 0 || len(out) >= 1000 {
				return out, nil
			}
		}
	})
}

// completeActivityIDs completes standalone activity IDs; running ones when running is set
// (for cancel and terminate).
func completeActivityIDs(cf *clientFlags, running bool) cobra.CompletionFunc {
	return completeFromServer(cf, func(ctx context.Context, c *clients) ([]string, error) {
		q := ""
		if running {
			q = `ExecutionStatus = "Running"`
		}
		var out []string
		seen := map[string]bool{}
		var token []byte
		for {
			resp, err := c.workflow.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{
				Namespace: c.ns, Query: q, PageSize: 500, NextPageToken: token,
			})
			if err != nil {
				return nil, err
			}
			for _, a := range resp.GetExecutions() {
				if seen[a.GetActivityId()] {
					continue
				}
				seen[a.GetActivityId()] = true
				out = append(out, cobra.CompletionWithDesc(a.GetActivityId(),
					fmt.Sprintf("%s %s %s", a.GetActivityType().GetName(), a.GetTaskQueue(), query.ActivityStatusName(a.GetStatus()))))
			}
			if token = resp.GetNextPageToken(); len(token) == 0 || len(out) >= 1000 {
				return out, nil
			}
		}
	})
}

// completeAPIKeyIDs completes the IDs of the namespace's API keys that are not revoked.
func completeAPIKeyIDs(cf *clientFlags) cobra.CompletionFunc {
	return completeFromServer(cf, func(ctx context.Context, c *clients) ([]string, error) {
		resp, err := c.admin.ListAPIKeys(ctx, &adminpb.ListAPIKeysRequest{Namespace: c.ns})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, k := range resp.GetKeys() {
			if k.GetRevokeTime() == nil {
				out = append(out, cobra.CompletionWithDesc(k.GetId(), strings.TrimSpace(k.GetRoles()+" "+k.GetDescription())))
			}
		}
		return out, nil
	})
}
