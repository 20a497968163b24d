package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/creds"
)

func ctlGrantsCmd(cf *ctlFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "grants",
		Short: "List, grant and revoke the roles of identities (certificate names, token holders), and create tokens.",
		Long: `List, grant and revoke the roles of identities, stored in etcd and applied by every
router and shard within a second, and create bearer tokens.

An identity is a SAN URI or DNS name of a client certificate, or any name for a caller
that presents only tokens. Roles: service (check, and read limited users and hot keys,
of its services only), operator (everything else: rules, grants, rebalance, reset), and
internal (routers and the rebalance job: the shard API). Grants of the routers' grants
file are listed with source "file" and changed only by editing it.

A token is shown once, when created, and stored only as its hash: nothing else ever
prints it.`,
	}
	token := &cobra.Command{Use: "token", Short: "Create bearer tokens (revoke one with 'grants revoke --token')."}
	token.AddCommand(ctlTokenCreateCmd(cf))
	cmd.AddCommand(ctlGrantsListCmd(cf), ctlGrantCmd(cf), ctlRevokeCmd(cf), token)
	return cmd
}

func ctlGrantsListCmd(cf *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the identities granted a role, with their services and token ids (never the tokens).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *shardlimitv1.ListGrantsResponse
			err := cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (err error) {
				resp, err = c.ListGrants(ctx, &shardlimitv1.ListGrantsRequest{})
				return err
			})
			if err != nil {
				return err
			}
			for _, k := range resp.Invalid {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s holds an invalid grant; its identity is refused\n", k)
			}
			w := cmd.OutOrStdout()
			return printOutput(w, cf.output, resp, func() error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tROLE\tSERVICES\tTOKENS\tSOURCE")
				for _, g := range resp.Grants {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g.Id, g.Role, orDash(strings.Join(g.Services, ",")), orDash(tokenIDs(g.Tokens)), g.Source)
				}
				return tw.Flush()
			})
		},
	}
}

func tokenIDs(ts []*shardlimitv1.TokenInfo) string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.Id
	}
	return strings.Join(ids, ",")
}

func ctlGrantCmd(cf *ctlFlags) *cobra.Command {
	var id, role string
	var services []string
	cmd := &cobra.Command{
		Use:   "grant --id ID --role service|operator|internal [--service S]...",
		Short: "Give an identity a role (and, for service, its services), replacing what it held but its tokens.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *shardlimitv1.GrantResponse
			err := cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (err error) {
				resp, err = c.Grant(ctx, &shardlimitv1.GrantRequest{Id: id, Role: role, Services: services})
				return err
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			return printOutput(w, cf.output, resp, func() error {
				_, err := fmt.Fprintf(w, "granted %s role %s%s at revision %d\n", resp.Grant.Id, resp.Grant.Role, servicesSuffix(resp.Grant.Services), resp.Revision)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "identity: a certificate's SAN URI or DNS name, or a name for a token holder (required)")
	f.StringVar(&role, "role", "", "service, operator or internal (required)")
	f.StringArrayVar(&services, "service", nil, "service the identity may act for (role service; repeatable)")
	_ = cmd.MarkFlagRequired("id")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

func servicesSuffix(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return " for " + strings.Join(ss, ", ")
}

func ctlRevokeCmd(cf *ctlFlags) *cobra.Command {
	var id, token string
	var services []string
	cmd := &cobra.Command{
		Use:   "revoke --id ID [--service S]... [--token TOKEN_ID]",
		Short: "Take services or one token from an identity; with neither, its whole grant and every token.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *shardlimitv1.RevokeResponse
			err := cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (err error) {
				resp, err = c.Revoke(ctx, &shardlimitv1.RevokeRequest{Id: id, Services: services, TokenId: token})
				return err
			})
			if err != nil {
				return err
			}
			if !resp.Existed {
				return fmt.Errorf("no grant of %s is stored", id)
			}
			w := cmd.OutOrStdout()
			return printOutput(w, cf.output, resp, func() error {
				if resp.Grant == nil {
					_, err := fmt.Fprintf(w, "revoked %s: its grant and tokens are gone\n", id)
					return err
				}
				_, err := fmt.Fprintf(w, "revoked from %s: %s holds role %s%s, tokens %s\n", id, id, resp.Grant.Role, servicesSuffix(resp.Grant.Services), orDash(tokenIDs(resp.Grant.Tokens)))
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "identity (required)")
	f.StringArrayVar(&services, "service", nil, "only this service (repeatable)")
	f.StringVar(&token, "token", "", "only the token with this id (as 'grants list' shows)")
	_ = cmd.MarkFlagRequired("id")
	return cmd
}

func ctlTokenCreateCmd(cf *ctlFlags) *cobra.Command {
	var id, out string
	cmd := &cobra.Command{
		Use:   "create --id ID [--out FILE]",
		Short: "Make a bearer token for an identity granted in etcd; it is printed once (or written to --out only).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *shardlimitv1.CreateTokenResponse
			err := cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (err error) {
				resp, err = c.CreateToken(ctx, &shardlimitv1.CreateTokenRequest{Id: id})
				return err
			})
			if err != nil {
				return err
			}
			view := map[string]any{"id": id, "token_id": resp.Info.Id, "created_unix_ns": resp.Info.CreatedUnixNs, "revision": resp.Revision}
			if out != "" {
				if err := creds.WriteFile(out, []byte(resp.Token+"\n"), 0o600); err != nil {
					return fmt.Errorf("--out: %w (the token is lost: revoke token %s and create another)", err, resp.Info.Id)
				}
				view["file"] = out
			} else {
				view["token"] = resp.Token
			}
			w := cmd.OutOrStdout()
			return printOutput(w, cf.output, view, func() error {
				return printToken(w, id, resp, out)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "identity the token authenticates as (required)")
	f.StringVar(&out, "out", "", "write the token to this file (mode 0600) instead of printing it")
	_ = cmd.MarkFlagRequired("id")
	return cmd
}

func printToken(w io.Writer, id string, resp *shardlimitv1.CreateTokenResponse, out string) error {
	created := time.Unix(0, resp.Info.CreatedUnixNs).UTC().Format(time.RFC3339)
	if out != "" {
		_, err := fmt.Fprintf(w, "token %s for %s, created %s, written to %s\n", resp.Info.Id, id, created, out)
		return err
	}
	_, err := fmt.Fprintf(w, "token %s for %s, created %s; it is shown this once and stored only as a hash:\n%s\n", resp.Info.Id, id, created, resp.Token)
	return err
}
