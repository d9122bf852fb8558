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

// clusterDescribe prints every live host of the cluster the addressed server belongs to.
func clusterDescribe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil cluster describe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs) // --address of any host of the cluster, --api-key, --tls-ca, ...
	output := fs.String("output", "table", "table or json")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "vigil: unknown output %q (want table or json)\n", *output)
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
	resp, err := client.DescribeCluster(ctx, &livenesspb.DescribeClusterRequest{})
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	if *output == "json" {
		out, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(resp)
		if err != nil {
			fmt.Fprintln(stderr, "vigil:", err)
			return 1
		}
		fmt.Fprintln(stdout, string(out))
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST ID\tFRONTEND\tHISTORY\tSHARDS\tLAST RENEWAL\tSTARTED")
	for _, h := range resp.GetHosts() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d %s\t%s\t%s\n", h.GetHostId(), h.GetFrontendAddress(), h.GetHistoryAddress(),
			len(h.GetShards()), shardList(h.GetShards()), ago(h.GetLastRenewalTime().AsTime(), h.LastRenewalTime != nil),
			ago(h.GetStartTime().AsTime(), h.StartTime != nil))
	}
	_ = tw.Flush()
	fmt.Fprintf(stdout, "%d shards; answered by %s", resp.GetNumShards(), resp.GetAnsweredBy())
	if u := resp.GetUnownedShards(); len(u) > 0 {
		fmt.Fprintf(stdout, "; owned by no live host: %s", shardList(u))
	}
	fmt.Fprintln(stdout)
	return 0
}

func shardList(shards []int32) string {
	parts := make([]string, len(shards))
	for i, s := range shards {
		parts[i] = fmt.Sprint(s)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func ago(t time.Time, set bool) string {
	if !set {
		return "-"
	}
	return time.Since(t).Round(time.Millisecond).String() + " ago"
}
