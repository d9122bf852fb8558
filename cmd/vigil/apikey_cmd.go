package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	adminpb "github.com/vigilhq/vigil/api/gen/adminpb/v1"
)

// apikeyCmd runs `vigil apikey create|list|revoke`.
func apikeyCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "vigil apikey: want create, list or revoke")
		return 2
	}
	switch args[0] {
	case "create":
		return apikeyCreate(args[1:], stdout, stderr)
	case "list":
		return apikeyList(args[1:], stdout, stderr)
	case "revoke":
		return apikeyRevoke(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "vigil apikey: unknown command %q (want create, list or revoke)\n", args[0])
	return 2
}

func apikeyCreate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil apikey create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	role := fs.String("role", "", "roles of the key, comma-separated: worker, reader, writer, admin (required)")
	description := fs.String("description", "", "what the key is for")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *role == "" {
		fmt.Fprintln(stderr, "vigil apikey create: --role is required")
		return 2
	}
	client, closeConn, err := cf.dialAdmin()
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.CreateAPIKey(ctx, &adminpb.CreateAPIKeyRequest{Namespace: *cf.namespace, Roles: *role, Description: *description})
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	// The key alone on stdout, so that `KEY=$(vigil apikey create ...)` works; the rest on
	// stderr.
	fmt.Fprintln(stdout, resp.GetKey())
	fmt.Fprintf(stderr, "created API key %s (namespace %s, roles %s); it is shown only this once\n",
		resp.GetInfo().GetId(), resp.GetInfo().GetNamespace(), resp.GetInfo().GetRoles())
	return 0
}

func apikeyList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil apikey list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	all := fs.Bool("all-namespaces", false, "list the keys of every namespace (needs a cluster admin key)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	client, closeConn, err := cf.dialAdmin()
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	defer closeConn()
	ns := *cf.namespace
	if *all {
		ns = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.ListAPIKeys(ctx, &adminpb.ListAPIKeysRequest{Namespace: ns})
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAMESPACE\tROLES\tCREATED\tREVOKED\tDESCRIPTION")
	for _, k := range resp.GetKeys() {
		revoked := "-"
		if k.GetRevokeTime() != nil {
			revoked = k.GetRevokeTime().AsTime().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.GetId(), k.GetNamespace(), k.GetRoles(),
			k.GetCreateTime().AsTime().Format(time.RFC3339), revoked, k.GetDescription())
	}
	_ = tw.Flush()
	return 0
}

func apikeyRevoke(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil apikey revoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	if err := fs.Parse(reorder(args)); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: vigil apikey revoke ID [flags]")
		return 2
	}
	client, closeConn, err := cf.dialAdmin()
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.RevokeAPIKey(ctx, &adminpb.RevokeAPIKeyRequest{Id: fs.Arg(0), Namespace: *cf.namespace}); err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	fmt.Fprintf(stdout, "revoked API key %s\n", fs.Arg(0))
	return 0
}

// tasktokenCmd runs `vigil tasktoken rotate`.
func tasktokenCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "rotate" {
		fmt.Fprintln(stderr, "usage: vigil tasktoken rotate [flags]")
		return 2
	}
	fs := flag.NewFlagSet("vigil tasktoken rotate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	client, closeConn, err := cf.dialAdmin()
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.RotateTaskTokenKey(ctx, &adminpb.RotateTaskTokenKeyRequest{})
	if err != nil {
		fmt.Fprintln(stderr, "vigil:", err)
		return 1
	}
	fmt.Fprintf(stdout, "task tokens are signed with key version %d (other hosts follow within a minute; older tokens stay valid)\n", resp.GetVersion())
	return 0
}
