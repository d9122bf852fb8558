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

func newClusterCmd(out *outputFlags) *cobra.Command {
	cf := newClientFlags()
	describe := &cobra.Command{
		Use:   "describe",
		Short: "List the cluster's vigil hosts, their addresses and shards",
		Long: `List the live vigil hosts of the cluster the addressed host belongs to (--address may name
any of them): their frontend and history addresses, shards, last renewal and start, then the
number of shards, the host that answered and any shard no live host owns. With -o json, jsonl
or yaml: the DescribeClusterResponse.`,
		Args: noArgs,
		RunE: runner(func(cmd *cobra.Command, _ []string) error {
			return call(cmd, cf, out, func(ctx context.Context, c *clients, p *printer) error {
				resp, err := c.liveness.DescribeCluster(ctx, &livenesspb.DescribeClusterRequest{})
				if err != nil {
					return err
				}
				return p.object(resp, func(w io.Writer) error { return clusterTable(p, resp, time.Now()) })
			})
		}),
	}
	g := newGroup("cluster", "Describe the cluster of vigil hosts", describe)
	cf.register(g)
	return g
}

func clusterTable(p *printer, resp *livenesspb.DescribeClusterResponse, now time.Time) error {
	t := &table{header: []string{"HOST ID", "FRONTEND", "HISTORY", "SHARDS", "LAST RENEWAL", "STARTED"}}
	for _, h := range resp.GetHosts() {
		t.row(h.GetHostId(), h.GetFrontendAddress(), h.GetHistoryAddress(),
			fmt.Sprintf("%d %s", len(h.GetShards()), shardList(h.GetShards())),
			ago(now, h.GetLastRenewalTime().AsTime(), h.LastRenewalTime != nil), ago(now, h.GetStartTime().AsTime(), h.StartTime != nil))
	}
	if err := p.writeTable(t); err != nil {
		return err
	}
	fmt.Fprintf(p.w, "%d shards; answered by %s", resp.GetNumShards(), resp.GetAnsweredBy())
	if u := resp.GetUnownedShards(); len(u) > 0 {
		fmt.Fprintf(p.w, "; owned by no live host: %s", shardList(u))
	}
	_, err := fmt.Fprintln(p.w)
	return err
}

func shardList(shards []int32) string {
	parts := make([]string, len(shards))
	for i, s := range shards {
		parts[i] = fmt.Sprint(s)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func ago(now, t time.Time, set bool) string {
	if !set {
		return "-"
	}
	return now.Sub(t).Round(time.Millisecond).String() + " ago"
}
