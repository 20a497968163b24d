package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/creds"
)

type ctlFlags struct {
	router    string
	timeout   time.Duration
	output    string
	tls       tlsFlags
	tokenFile string
	config    string
	// fromEnv are the global flags set from their environment variable,
	// changed those set on the command line, fromConfig those set from the
	// client config file.
	fromEnv, changed, fromConfig map[string]bool
}

// envToken is the environment variable that may hold ctl's bearer token
// itself (there is no flag: a command line is visible to every user of the
// machine).
const envToken = envPrefix + "TOKEN"

// envPrefix starts the environment variable of each of ctl's global flags:
// SHARDLIMIT_ and the flag's name in upper snake case (--tls-ca:
// SHARDLIMIT_TLS_CA), as etcdctl does with ETCDCTL_.
const envPrefix = "SHARDLIMIT_"

func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func ctlCmd() *cobra.Command {
	cf := ctlFlags{fromEnv: map[string]bool{}, changed: map[string]bool{}, fromConfig: map[string]bool{}}
	cmd := &cobra.Command{
		Use:   "ctl",
		Short: "Operator CLI: talk to a running cluster.",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&cf.router, "router", "127.0.0.1:8081", "router gRPC address, host:port")
	pf.DurationVar(&cf.timeout, "timeout", 5*time.Second, "deadline of each call to the router, its dial and TLS handshake included (rebalance apply and shardmap rollback: default 10m)")
	pf.StringVarP(&cf.output, "output", "o", "text", outputUsage)
	cf.tls.register(pf, false)
	pf.StringVar(&cf.tokenFile, "token-file", "", "file holding the bearer token to call with (read again when it changes); "+envToken+" may hold the token itself")
	pf.StringVar(&cf.config, "config", "", "client config file (what 'shardlimit dev' writes): the router and credentials for the flags not set otherwise")
	var env strings.Builder
	pf.VisitAll(func(f *pflag.Flag) {
		fmt.Fprintf(&env, "  %-30s --%s\n", envName(f.Name), f.Name)
		f.Usage += " [$" + envName(f.Name) + "]"
	})
	cmd.Long = cmd.Short + `

Environment: every global flag is also read from a variable, SHARDLIMIT_
and the flag's name in upper snake case; a flag on the command line
overrides its variable.
` + env.String() + `  ` + fmt.Sprintf("%-30s", envToken) + ` the bearer token itself (no flag)

Credentials: a flag or variable wins over the client config file of
--config/SHARDLIMIT_CONFIG, whose keys are the flags' names in snake case
(router, tls_ca, tls_cert, tls_key, tls_server_name, token_file).
'shardlimit dev' writes one with the operator's certificate and prints the
export line. A token (--token-file or SHARDLIMIT_TOKEN) is sent as
"authorization: Bearer" and identifies the caller instead of the
certificate. ctl never prints a token, except the one 'grants token
create' makes, once.
` + `
Output: -o text (for people), json or yaml. JSON and YAML are stable, for
scripts: snake_case keys, 64-bit integers as numbers, sorted keys, fixed
indentation. What 'rules get -o yaml' or '-o json' prints, 'rules apply -f'
accepts unchanged ('-f -' reads standard input).

Exit codes:
` + exitCodesHelp()
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		if err := cf.applyEnv(c.Flags(), pf); err != nil {
			return err
		}
		if err := cf.applyConfig(c.Flags()); err != nil {
			return err
		}
		return checkOutput(cf.output)
	}
	cmd.AddCommand(ctlCheckCmd(&cf), ctlRulesCmd(&cf), ctlMembersCmd(&cf), ctlRebalanceCmd(&cf), ctlShardMapCmd(&cf), ctlLimitedCmd(&cf), ctlTopCmd(&cf), ctlGrantsCmd(&cf), ctlResetCmd(&cf))
	return cmd
}

// applyEnv sets each of ctl's global flags (global) that the command line
// left unset from its environment variable, as the servers do with every
// flag (applyEnv), and records which came from where. fs is the running
// command's flag set, which holds the global flags too.
func (cf *ctlFlags) applyEnv(fs, global *pflag.FlagSet) error {
	global.VisitAll(func(g *pflag.Flag) {
		if f := fs.Lookup(g.Name); f != nil && f.Changed {
			cf.changed[f.Name] = true
		}
	})
	src, err := applyEnv(fs, func(f *pflag.Flag) bool { return global.Lookup(f.Name) != nil })
	for name := range src.fromEnv {
		cf.fromEnv[name] = true
	}
	return err
}

// applyConfig sets each global flag that neither the command line nor
// its variable set from the client config file of --config, if any.
func (cf *ctlFlags) applyConfig(fs *pflag.FlagSet) error {
	if cf.config == "" {
		return nil
	}
	cfg, err := creds.LoadClientConfig(cf.config)
	if err != nil {
		return usageErrorf("%s: %v", cf.source("config", cf.config), err)
	}
	for name, v := range cfg.Flags() {
		if cf.changed[name] || cf.fromEnv[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return usageErrorf("%s: %s: %v", cf.config, name, err)
		}
		cf.fromConfig[name] = true
	}
	return nil
}

// source names a global flag, its variable and where its value came from,
// for error messages: "--router/SHARDLIMIT_ROUTER x:1 (the default)".
func (cf *ctlFlags) source(flag, value string) string {
	from := "the default"
	switch {
	case cf.fromEnv[flag]:
		from = "from " + envName(flag)
	case cf.changed[flag]:
		from = "from the command line"
	case cf.fromConfig[flag]:
		from = "from " + cf.config
	}
	return fmt.Sprintf("--%s/%s %s (%s)", flag, envName(flag), value, from)
}

func ctlCheckCmd(cf *ctlFlags) *cobra.Command {
	var c shardlimitv1.Check
	var hits int64
	cmd := &cobra.Command{
		Use:   "check",
		Short: fmt.Sprintf("Ask whether a user may call a service's endpoint now (consumes --hits); exits %d when denied.", exitDenied),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.Hits = &hits
			var resp *shardlimitv1.CheckResponse
			err := cf.call(cmd, cf.timeout, func(ctx context.Context, conn *grpc.ClientConn) (err error) {
				resp, err = shardlimitv1.NewRateLimiterClient(conn).Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{&c}})
				return err
			})
			if err != nil {
				return err
			}
			d := resp.Decisions[0]
			if err := printDecision(cmd.OutOrStdout(), cf.output, &c, d); err != nil {
				return err
			}
			if !d.Allowed {
				return withCode(exitDenied, nil)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Service, "service", "", "service (required)")
	f.StringVar(&c.Endpoint, "endpoint", "", "endpoint (required)")
	registerKeyFlags(f, &c.User, &c.ApiKey, &c.Ip)
	f.Int64Var(&hits, "hits", 1, "cost of the call; 0 reads without consuming")
	for _, name := range []string{"service", "endpoint"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// registerKeyFlags registers --user, --api-key and --ip: the request
// attributes that rules key their counters by, as check and reset take
// them.
func registerKeyFlags(f *pflag.FlagSet, user, apiKey, ip *string) {
	f.StringVar(user, "user", "", "user (for rules keyed by user)")
	f.StringVar(apiKey, "api-key", "", "API key (for rules keyed by api_key)")
	f.StringVar(ip, "ip", "", "client IP (for rules keyed by ip)")
}

func printDecision(w io.Writer, format string, c *shardlimitv1.Check, d *shardlimitv1.Decision) error {
	// The API key is a credential: never printed.
	view := map[string]any{"service": c.Service, "endpoint": c.Endpoint, "user": c.User, "ip": c.Ip, "hits": c.GetHits(), "decision": d}
	return printOutput(w, format, view, func() error {
		verdict := "DENIED "
		if d.Allowed {
			verdict = "ALLOWED"
		}
		line := fmt.Sprintf("%s  %s %s user=%s hits=%d", verdict, c.Service, c.Endpoint, c.User, c.GetHits())
		switch {
		case d.Overload:
			line += fmt.Sprintf("  rule=%s  by failure policy: the router was overloaded and shed the check", d.Rule)
		case d.FailurePolicy:
			line += fmt.Sprintf("  rule=%s  by failure policy: the owner shard did not answer", d.Rule)
		case d.Rule == "":
			line += "  no rule applies"
		default:
			line += fmt.Sprintf("  rule=%s limit=%d window=%v remaining=%d reset_after=%v next_after=%v", d.Rule, d.Limit, d.Window.AsDuration(),
				d.Remaining, d.ResetAfter.AsDuration().Round(time.Millisecond), d.NextAfter.AsDuration().Round(time.Millisecond))
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
	})
}
