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

An identity names its kind, and matches callers of that kind only:
  uri:<SAN URI>     a client certificate's SAN URI   (uri:spiffe://shardlimit/operator)
  dns:<DNS name>    a client certificate's DNS name  (dns:envoy.example.com)
  token:<name>      a caller that presents only bearer tokens (token:shop)
A certificate's DNS name never matches a uri: or token: grant. Grants stored before
kinds keep working: an id that parses as an absolute URI is a uri: grant, any other a
token: grant; the next change of such a grant stores it under its kind.

Roles: service (check, and read limited users and hot keys, of its services only) and
operator (everything else: rules, grants, rebalance, reset). The internal role (routers
and the rebalance job: the shard API) is granted only by the components' grants file
(--grants-file), never here: one stored in etcd is ignored and listed as invalid.
Grants of the routers' grants file are listed with source "file" and changed only by
editing it.

A token is shown once, when created, and stored only as its hash: nothing else ever
prints it. It may expire (token create --ttl); an expired token is refused.`,
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
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g.Id, g.Role, orDash(strings.Join(g.Services, ",")), orDash(tokenIDs(g.Tokens, time.Now())), g.Source)
				}
				return tw.Flush()
			})
		},
	}
}

// tokenIDs lists tokens by id, each with its expiry if it has one:
// "a1b2c3d4e5f6 (expires 2026-12-01T10:00:00Z)", "(expired ...)" once past.
func tokenIDs(ts []*shardlimitv1.TokenInfo, now time.Time) string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.Id + expiryOf(t, now)
	}
	return strings.Join(ids, ",")
}

// expiryOf is " (expires T)" or " (expired T)" for a token with an
// expiry, "" for one without.
func expiryOf(t *shardlimitv1.TokenInfo, now time.Time) string {
	if t.ExpiresUnixNs == 0 {
		return ""
	}
	at := time.Unix(0, t.ExpiresUnixNs).UTC()
	verb := "expires"
	if !now.Before(at) {
		verb = "expired"
	}
	return fmt.Sprintf(" (%s %s)", verb, at.Format(time.RFC3339))
}

func ctlGrantCmd(cf *ctlFlags) *cobra.Command {
	var id, role string
	var services []string
	cmd := &cobra.Command{
		Use:   "grant --id uri:URI|dns:NAME|token:NAME --role service|operator [--service S]...",
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
	f.StringVar(&id, "id", "", "identity, naming its kind: uri:<certificate SAN URI>, dns:<certificate DNS name> or token:<name of a token holder> (required)")
	f.StringVar(&role, "role", "", "service or operator (required; internal only in the components' --grants-file)")
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
				_, err := fmt.Fprintf(w, "revoked from %s: %s holds role %s%s, tokens %s\n", resp.Grant.Id, resp.Grant.Id, resp.Grant.Role, servicesSuffix(resp.Grant.Services), orDash(tokenIDs(resp.Grant.Tokens, time.Now())))
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "identity, as 'grants list' shows it (required)")
	f.StringArrayVar(&services, "service", nil, "only this service (repeatable)")
	f.StringVar(&token, "token", "", "only the token with this id (as 'grants list' shows)")
	_ = cmd.MarkFlagRequired("id")
	return cmd
}

func ctlTokenCreateCmd(cf *ctlFlags) *cobra.Command {
	var id, out string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "create --id ID [--ttl DURATION] [--out FILE]",
		Short: "Make a bearer token for an identity granted in etcd; it is printed once (or written to --out only).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl%time.Second != 0 || ttl < 0 {
				return usageErrorf("--ttl: %v is not a whole, positive number of seconds", ttl)
			}
			var resp *shardlimitv1.CreateTokenResponse
			err := cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (err error) {
				resp, err = c.CreateToken(ctx, &shardlimitv1.CreateTokenRequest{Id: id, TtlSeconds: int64(ttl / time.Second)})
				return err
			})
			if err != nil {
				return err
			}
			view := map[string]any{"id": id, "token_id": resp.Info.Id, "created_unix_ns": resp.Info.CreatedUnixNs, "expires_unix_ns": resp.Info.ExpiresUnixNs, "revision": resp.Revision}
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
	f.DurationVar(&ttl, "ttl", 0, "the token expires this long after its creation, then is refused (1m to 87600h); 0: never")
	_ = cmd.MarkFlagRequired("id")
	return cmd
}

func printToken(w io.Writer, id string, resp *shardlimitv1.CreateTokenResponse, out string) error {
	created := time.Unix(0, resp.Info.CreatedUnixNs).UTC().Format(time.RFC3339) + expiryOf(resp.Info, time.Now())
	if out != "" {
		_, err := fmt.Fprintf(w, "token %s for %s, created %s, written to %s\n", resp.Info.Id, id, created, out)
		return err
	}
	_, err := fmt.Fprintf(w, "token %s for %s, created %s; it is shown this once and stored only as a hash:\n%s\n", resp.Info.Id, id, created, resp.Token)
	return err
}
