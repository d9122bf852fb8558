package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	adminpb "github.com/vigilhq/vigil/api/gen/adminpb/v1"
)

func newAPIKeyCmd(out *outputFlags) *cobra.Command {
	cf := newClientFlags()
	g := newGroup("apikey", "Create, list and revoke API keys",
		newAPIKeyCreateCmd(cf, out), newAPIKeyListCmd(cf, out), newAPIKeyRevokeCmd(cf))
	cf.register(g)
	return g
}

func newAPIKeyCreateCmd(cf *clientFlags, out *outputFlags) *cobra.Command {
	var role, description string
	cmd := &cobra.Command{
		Use:   "create --role ROLES",
		Short: "Mint an API key (admin); prints the key alone",
		Long: `Mint an API key for the namespace (needs an admin key). The key is printed alone on stdout,
so that KEY=$(vigil apikey create ...) works, and is shown only this once; what it is goes to
stderr. With -o json, jsonl or yaml: the CreateAPIKeyResponse (the key and its record).`,
		Example: `  KEY=$(vigil apikey create --namespace orders --role worker,writer --description fleet)`,
		Args:    noArgs,
		RunE: runner(func(cmd *cobra.Command, _ []string) error {
			return call(cmd, cf, out, func(ctx context.Context, c *clients, p *printer) error {
				resp, err := c.admin.CreateAPIKey(ctx, &adminpb.CreateAPIKeyRequest{Namespace: c.ns, Roles: role, Description: description})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "created API key %s (namespace %s, roles %s); it is shown only this once\n",
					resp.GetInfo().GetId(), resp.GetInfo().GetNamespace(), resp.GetInfo().GetRoles())
				return p.object(resp, func(w io.Writer) error {
					_, err := fmt.Fprintln(w, resp.GetKey())
					return err
				})
			})
		}),
	}
	cmd.Flags().StringVar(&role, "role", "", "roles of the key, comma-separated: worker, reader, writer, admin")
	cmd.Flags().StringVar(&description, "description", "", "what the key is for")
	_ = cmd.MarkFlagRequired("role")
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions([]string{"worker", "reader", "writer", "admin"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func newAPIKeyListCmd(cf *clientFlags, out *outputFlags) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List API keys (never their secrets)",
		Long: `List the namespace's API keys: ID, roles, creation and revocation. The secret is never
listed. With -o json, jsonl or yaml: the APIKeyInfo records.`,
		Args: noArgs,
		RunE: runner(func(cmd *cobra.Command, _ []string) error {
			return call(cmd, cf, out, func(ctx context.Context, c *clients, p *printer) error {
				ns := c.ns
				if all {
					ns = ""
				}
				resp, err := c.admin.ListAPIKeys(ctx, &adminpb.ListAPIKeysRequest{Namespace: ns})
				if err != nil {
					return err
				}
				return list(p, resp.GetKeys(), []string{"ID", "NAMESPACE", "ROLES", "CREATED", "REVOKED", "DESCRIPTION"},
					func(k *adminpb.APIKeyInfo) []string {
						return []string{k.GetId(), k.GetNamespace(), k.GetRoles(), timestamp(k.GetCreateTime(), k.CreateTime != nil),
							orDash(timestamp(k.GetRevokeTime(), k.RevokeTime != nil)), k.GetDescription()}
					})
			})
		}),
	}
	cmd.Flags().BoolVar(&all, "all-namespaces", false, "list the keys of every namespace (needs a cluster admin key)")
	return cmd
}

func newAPIKeyRevokeCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:               "revoke ID",
		Short:             "Revoke an API key at once on every host",
		Args:              exactArgs("ID"),
		ValidArgsFunction: completeAPIKeyIDs(cf),
		RunE: runner(func(cmd *cobra.Command, args []string) error {
			c, err := cf.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := cf.callContext(cmd.Context())
			defer cancel()
			if _, err := c.admin.RevokeAPIKey(ctx, &adminpb.RevokeAPIKeyRequest{Id: args[0], Namespace: c.ns}); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "revoked API key %s\n", args[0])
			return err
		}),
	}
}

func newTaskTokenCmd(out *outputFlags) *cobra.Command {
	cf := newClientFlags()
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Sign task tokens with a new cluster key (cluster admin)",
		Long: `Add a task-token key version and sign new task tokens with it: this host at once, the
others within a minute; tokens signed with older versions stay valid. With -o json, jsonl or
yaml: the RotateTaskTokenKeyResponse.`,
		Args: noArgs,
		RunE: runner(func(cmd *cobra.Command, _ []string) error {
			return call(cmd, cf, out, func(ctx context.Context, c *clients, p *printer) error {
				resp, err := c.admin.RotateTaskTokenKey(ctx, &adminpb.RotateTaskTokenKeyRequest{})
				if err != nil {
					return err
				}
				return p.object(resp, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "task tokens are signed with key version %d (other hosts follow within a minute; older tokens stay valid)\n", resp.GetVersion())
					return err
				})
			})
		}),
	}
	g := newGroup("tasktoken", "Rotate the key that signs task tokens", rotate)
	cf.register(g)
	return g
}
