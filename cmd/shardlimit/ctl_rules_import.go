package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/envoy/envoyconfig"
	"github.com/shardlimit/shardlimit/router/rules"
)

func ctlRulesImportCmd(cf *ctlFlags) *cobra.Command {
	var from []string
	var opts envoyconfig.Options
	var apply, dryRun, prune, strict bool
	cmd := &cobra.Command{
		Use:   "import --from-envoy FILE|DIR...",
		Short: "Convert envoy ratelimit's YAML config into a rules file on standard output (or --apply it), reporting on standard error, with file and line, what the rules cannot express.",
		Long: `Convert envoy ratelimit's configuration (one domain per file: nested descriptors with
key, value, rate_limit {unit, requests_per_unit, unlimited, name, replaces}, shadow_mode,
quota_mode, detailed_metric, value_to_metric, share_threshold, value prefix wildcards "foo*")
into shardlimit descriptor rules, one service per domain. A directory is read as envoy ratelimit reads its config directory: every *.yaml
and *.yml file in it, in name order; files of one domain are merged.

The rules are printed as a rules file, each rule under a comment naming the line it comes
from, for review: pipe it to "shardlimit ctl rules apply -f -", or give --apply. Standard
error lists, per item with file and line, what the rules cannot express ("cannot express")
and the unlimited rules added to keep envoy ratelimit's answer where its tree walk gives no
limit ("note"): a key the rules cannot express (quota_mode's metadata, per-value metrics,
share_threshold) is such an item, not an error. --strict exits 4 when anything cannot be
expressed, printing nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			files, err := envoyFiles(from)
			if err != nil {
				return err
			}
			res, err := envoyconfig.Load(files, opts)
			if err != nil {
				return fmt.Errorf("nothing converted:\n%w", err)
			}
			lossy := 0
			for _, n := range res.Notes {
				fmt.Fprintln(cmd.ErrOrStderr(), n)
				if n.Lossy {
					lossy++
				}
			}
			if strict && lossy > 0 {
				return withCode(exitFailed, fmt.Errorf("--strict: %s cannot be expressed, nothing converted", plural(lossy, "item")))
			}
			rs, err := res.Parsed()
			if err != nil {
				return fmt.Errorf("the converted rules are invalid, nothing converted:\n%w", err)
			}
			if err := rules.DefaultBounds().Check(rules.Count(rs)); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v (the routers' defaults)\n", err)
			}
			b, err := res.YAML()
			if err != nil {
				return err
			}
			if !apply {
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			var resp *shardlimitv1.ApplyRulesResponse
			err = cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (err error) {
				resp, err = c.ApplyRules(ctx, &shardlimitv1.ApplyRulesRequest{FileName: strings.Join(files, ","), Yaml: b, DryRun: dryRun, Prune: prune})
				return err
			})
			if err != nil {
				return err
			}
			return printChanges(cmd.OutOrStdout(), cf.output, resp)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&from, "from-envoy", nil, "envoy ratelimit config file, or a directory of them; repeatable (required)")
	f.StringVar(&opts.Algorithm, "algorithm", "fixed_window", "algorithm of the converted rules (envoy ratelimit counts fixed windows)")
	f.BoolVar(&opts.AllowRequestOverride, "allow-request-override", false, "let a descriptor's own limit (Envoy's RateLimitDescriptor.limit) replace the converted rules' limits, as envoy ratelimit does; off by default: a caller must not raise its own limit")
	f.BoolVar(&apply, "apply", false, "store the converted rules through the admin API, all or nothing, instead of printing them")
	f.BoolVar(&dryRun, "dry-run", false, "with --apply: show the changes without storing them")
	f.BoolVar(&prune, "prune", false, "with --apply: also delete stored rules of the converted services that the conversion lacks")
	f.BoolVar(&strict, "strict", false, "fail (exit 4, printing no rules) when anything cannot be expressed")
	_ = cmd.MarkFlagRequired("from-envoy")
	return cmd
}

// envoyFiles expands the --from-envoy paths: a file as is, a directory
// to its *.yaml and *.yml files in name order.
func envoyFiles(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		var in []string
		for _, pat := range []string{"*.yaml", "*.yml"} {
			m, err := filepath.Glob(filepath.Join(p, pat))
			if err != nil {
				return nil, err
			}
			in = append(in, m...)
		}
		if len(in) == 0 {
			return nil, fmt.Errorf("--from-envoy %s: no *.yaml or *.yml file in the directory", p)
		}
		slices.Sort(in)
		out = append(out, in...)
	}
	return out, nil
}
