package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
)

// resetSelector is what `ctl reset` resets: the counters a check of
// (service, endpoint, user, api key, ip) uses, as `ctl check` names them,
// or one counter by its rule's name and its own name (rule, with user as
// the counter's name, as hot keys show it).
type resetSelector struct {
	service, endpoint, rule string
	attrs                   rules.Attributes
}

func ctlResetCmd(cf *ctlFlags) *cobra.Command {
	var sel resetSelector
	cmd := &cobra.Command{
		Use:   "reset --service S --endpoint E --user U",
		Short: "Forget a user's counters on their owner shards: the user's next check starts fresh (operator).",
		Long: `Forget a user's counters on their owner shards: the user's next check
starts fresh (operator role). The answering router also drops the user's
held denial from its over-limit cache (another router's may deny the user
until its retry time).

The counters are selected as 'ctl check' selects them: --service,
--endpoint and the attributes the rules key their counters by (--user,
--api-key, --ip). Every counted rule that applies to the endpoint, as the
rules stored in etcd say, is reset.

--rule names one rule instead of --endpoint, with --user as the counter's
name as hot keys and 'ctl top' show it (for a rule keyed by several
attributes, "alice|10.0.0.1"; by API key, "key:" and its fingerprint). It
is kept for scripts, and for what --endpoint cannot select: descriptor
(Envoy) rules, and routers run with --rules-file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case sel.rule == "" && sel.endpoint == "":
				return usageErrorf("--endpoint: required (or --rule naming the rule)")
			case sel.rule != "" && sel.endpoint != "":
				return usageErrorf("--endpoint and --rule: one or the other")
			case sel.rule != "" && sel.attrs.User == "":
				return usageErrorf("--user: required with --rule: the counter's name, as hot keys show it")
			case sel.rule != "" && (sel.attrs.APIKey != "" || sel.attrs.IP != ""):
				return usageErrorf("--api-key and --ip: only with --endpoint; with --rule, --user is the counter's name")
			}
			var resets []*shardlimitv1.ResetKeyRequest
			var resps []*shardlimitv1.ResetKeyResponse
			err := cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) error {
				var err error
				if resets, err = sel.counters(ctx, c); err != nil {
					return err
				}
				for _, req := range resets {
					resp, err := c.ResetKey(ctx, req)
					if err != nil {
						return err
					}
					resps = append(resps, resp)
				}
				return nil
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			var view any = resps[0] // --rule: one counter, printed as before
			if sel.endpoint != "" {
				var list []any
				for i, req := range resets {
					list = append(list, map[string]any{"service": req.Service, "rule": req.Rule, "user": req.User, "existed": resps[i].Existed, "shard": resps[i].Shard})
				}
				view = map[string]any{"resets": list}
			}
			return printOutput(w, cf.output, view, func() error {
				for i, req := range resets {
					what := "was reset"
					if !resps[i].Existed {
						what = "held no state (nothing to reset)"
					}
					if _, err := fmt.Fprintf(w, "%s/%s user=%s on %s %s\n", req.Service, req.Rule, req.User, resps[i].Shard, what); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&sel.service, "service", "", "service (required)")
	f.StringVar(&sel.endpoint, "endpoint", "", "endpoint, as check takes it: every counted rule that applies to it is reset (required, or --rule)")
	registerKeyFlags(f, &sel.attrs.User, &sel.attrs.APIKey, &sel.attrs.IP)
	f.StringVar(&sel.rule, "rule", "", "the rule's name instead of --endpoint, with --user the counter's name (for descriptor rules, and routers run with --rules-file)")
	_ = cmd.MarkFlagRequired("service")
	return cmd
}

// errNoRule is the error of an endpoint that no counted rule applies to.
var errNoRule = errors.New("no counted rule applies")

// counters returns the ResetKey requests for what sel selects: with
// --rule, the one counter it names; with --endpoint, the counter of each
// counted rule that applies to the endpoint, by the rules stored in etcd
// (resolved and named by the routers' own functions).
func (sel *resetSelector) counters(ctx context.Context, c shardlimitv1.AdminClient) ([]*shardlimitv1.ResetKeyRequest, error) {
	if sel.rule != "" {
		return []*shardlimitv1.ResetKeyRequest{{Service: sel.service, Rule: sel.rule, User: sel.attrs.User}}, nil
	}
	resp, err := c.GetRules(ctx, &shardlimitv1.GetRulesRequest{Service: sel.service})
	if err != nil {
		return nil, err
	}
	stored, err := rules.Parse("the stored rules", resp.Yaml)
	if err != nil {
		return nil, err
	}
	var reqs []*shardlimitv1.ResetKeyRequest
	for _, r := range rules.NewSet(stored).Resolve(sel.service, sel.endpoint) {
		if !r.Counted() {
			continue
		}
		user, missing := r.CounterUser(sel.attrs)
		if missing != "" {
			return nil, usageErrorf("--%s: required: rule %s/%s keys its counters by %v", flagOfKey(missing), r.Service, r.Name, r.Key)
		}
		reqs = append(reqs, &shardlimitv1.ResetKeyRequest{Service: sel.service, Rule: r.Name, User: user})
	}
	if len(reqs) == 0 {
		return nil, withCode(exitFailed, fmt.Errorf("%w to endpoint %s of service %s in the rules stored in etcd: nothing to reset (a router run with --rules-file: name the rule with --rule)", errNoRule, sel.endpoint, sel.service))
	}
	return reqs, nil
}

// flagOfKey is the flag that gives a key attribute.
func flagOfKey(attr string) string {
	if attr == rules.KeyAPIKey {
		return "api-key"
	}
	return attr
}
