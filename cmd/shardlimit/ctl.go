package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/rpc"
)

type ctlFlags struct {
	router  string
	timeout time.Duration
	output  string
	tls     tlsFlags
}

func ctlCmd() *cobra.Command {
	var cf ctlFlags
	cmd := &cobra.Command{
		Use:   "ctl",
		Short: "Operator CLI: talk to a running cluster.",
	}
	cmd.PersistentFlags().StringVar(&cf.router, "router", "127.0.0.1:8081", "router gRPC address")
	cmd.PersistentFlags().DurationVar(&cf.timeout, "timeout", 5*time.Second, "deadline of each call")
	cmd.PersistentFlags().StringVarP(&cf.output, "output", "o", "text", "output format: text or json (rules get: also yaml)")
	cf.tls.register(cmd.PersistentFlags(), false)
	cmd.AddCommand(ctlCheckCmd(&cf), ctlRulesCmd(&cf), ctlMembersCmd(&cf), ctlRebalanceCmd(&cf), ctlShardMapCmd(&cf), ctlLimitedCmd(&cf), ctlTopCmd(&cf))
	return cmd
}

// checkOutput rejects an output format the command does not print.
func (cf *ctlFlags) checkOutput(formats ...string) error {
	if len(formats) == 0 {
		formats = []string{"text", "json"}
	}
	for _, f := range formats {
		if cf.output == f {
			return nil
		}
	}
	return fmt.Errorf("output: %q is not one of %s", cf.output, strings.Join(formats, ", "))
}

// dial connects to the router after checking the output format (text or
// json).
func (cf *ctlFlags) dial() (*grpc.ClientConn, error) { return cf.dialAny("text", "json") }

func (cf *ctlFlags) dialAny(formats ...string) (*grpc.ClientConn, error) {
	if err := cf.checkOutput(formats...); err != nil {
		return nil, err
	}
	cfg, err := cf.tls.client()
	if err != nil {
		return nil, err
	}
	return grpc.NewClient(cf.router, rpc.DialCreds(cfg))
}

// printJSON prints a proto message with protojson, anything else with
// encoding/json, indented.
func printJSON(w io.Writer, v any) error {
	if m, ok := v.(proto.Message); ok {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: true}.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func ctlCheckCmd(cf *ctlFlags) *cobra.Command {
	var c shardlimitv1.Check
	var hits int64
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Ask whether a user may call a service's endpoint now (consumes --hits).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.Hits = &hits
			conn, err := cf.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
			defer cancel()
			resp, err := shardlimitv1.NewRateLimiterClient(conn).Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{&c}})
			if err != nil {
				return err
			}
			return printDecision(cmd.OutOrStdout(), cf.output, &c, resp.Decisions[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Service, "service", "", "service (required)")
	f.StringVar(&c.Endpoint, "endpoint", "", "endpoint (required)")
	f.StringVar(&c.User, "user", "", "user (for rules keyed by user)")
	f.StringVar(&c.ApiKey, "api-key", "", "API key (for rules keyed by api_key)")
	f.StringVar(&c.Ip, "ip", "", "client IP (for rules keyed by ip)")
	f.Int64Var(&hits, "hits", 1, "cost of the call; 0 reads without consuming")
	for _, name := range []string{"service", "endpoint"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func printDecision(w io.Writer, format string, c *shardlimitv1.Check, d *shardlimitv1.Decision) error {
	if format == "json" {
		b, err := protojson.Marshal(d)
		if err != nil {
			return err
		}
		out := map[string]any{"service": c.Service, "endpoint": c.Endpoint, "user": c.User, "hits": c.GetHits(), "decision": json.RawMessage(b)}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	verdict := "DENIED "
	if d.Allowed {
		verdict = "ALLOWED"
	}
	line := fmt.Sprintf("%s  %s %s user=%s hits=%d", verdict, c.Service, c.Endpoint, c.User, c.GetHits())
	switch {
	case d.FailurePolicy:
		line += fmt.Sprintf("  rule=%s  by failure policy: the owner shard did not answer", d.Rule)
	case d.Rule == "":
		line += "  no rule applies"
	default:
		line += fmt.Sprintf("  rule=%s limit=%d remaining=%d reset_after=%v", d.Rule, d.Limit, d.Remaining, d.ResetAfter.AsDuration().Round(time.Millisecond))
		switch {
		case d.Allowed:
		case d.RetryAfter.AsDuration() > 100*365*24*time.Hour:
			line += " retry_after=never (the hits exceed what the rule can ever allow)"
		default:
			line += fmt.Sprintf(" retry_after=%v", d.RetryAfter.AsDuration().Round(time.Millisecond))
		}
	}
	_, err := fmt.Fprintln(w, line)
	return err
}
