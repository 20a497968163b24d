package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
)

func ctlRulesCmd(cf *ctlFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "rules", Short: "Validate, apply, show, diff and delete the rules stored in etcd; import envoy ratelimit's."}
	cmd.AddCommand(ctlRulesValidateCmd(cf), ctlRulesApplyCmd(cf, false), ctlRulesApplyCmd(cf, true), ctlRulesGetCmd(cf), ctlRulesDeleteCmd(cf), ctlRulesImportCmd(cf))
	return cmd
}

// readRulesFile reads a rules file, YAML or JSON, from path or, for "-",
// standard input.
func readRulesFile(path string) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	return yamlSafeJSON(b), nil
}

// yamlSafeJSON rewrites the strings of a JSON document so that the YAML
// parser reads them as JSON does, and returns anything that is not JSON
// unchanged. YAML is a superset of JSON except for two string escapes: "\/"
// and UTF-16 surrogate pairs ("\ud83d\ude00"), which YAML rejects. Each
// string is decoded and encoded again by encoding/json, which writes
// neither; nothing else changes, so errors keep their lines.
func yamlSafeJSON(b []byte) []byte {
	if !json.Valid(b) || !bytes.Contains(b, []byte(`\`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			out = append(out, b[i])
			continue
		}
		end := i + 1
		for b[end] != '"' {
			if b[end] == '\\' {
				end++
			}
			end++
		}
		var s string
		if err := json.Unmarshal(b[i:end+1], &s); err != nil {
			return b
		}
		var enc bytes.Buffer
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		if err := e.Encode(s); err != nil {
			return b
		}
		out = append(out, bytes.TrimSuffix(enc.Bytes(), []byte("\n"))...)
		i = end
	}
	return out
}

func ctlRulesValidateCmd(cf *ctlFlags) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "validate -f FILE...",
		Short: "Check rules files locally, reporting every error with file, line and field, and the routers' default bounds on the number of rules.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []string
			var all []rules.Rule
			for _, f := range files {
				b, err := readRulesFile(f)
				if err != nil {
					return err
				}
				rs, err := rules.Parse(f, b)
				if err != nil {
					errs = append(errs, err.Error())
					continue
				}
				all = append(all, rs...)
			}
			if len(errs) == 0 {
				if err := rules.DefaultBounds().Check(rules.Count(all)); err != nil {
					errs = append(errs, err.Error()+" (the routers' defaults)")
				}
			}
			if len(errs) > 0 {
				return fmt.Errorf("invalid rules:\n%s", strings.Join(errs, "\n"))
			}
			total := len(all)
			w := cmd.OutOrStdout()
			view := map[string]any{"valid": true, "files": len(files), "rules": total}
			return printOutput(w, cf.output, view, func() error {
				verb := "are"
				if total == 1 {
					verb = "is"
				}
				_, err := fmt.Fprintf(w, "%s in %s %s valid\n", plural(total, "rule"), plural(len(files), "file"), verb)
				return err
			})
		},
	}
	cmd.Flags().StringArrayVarP(&files, "file", "f", nil, "rules file (- for standard input); repeatable")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// ctlRulesApplyCmd is `apply` or, with diff, `diff` (an apply that writes
// nothing).
func ctlRulesApplyCmd(cf *ctlFlags, diff bool) *cobra.Command {
	var file string
	var dryRun, prune bool
	use, short := "apply -f FILE", "Store every rule of a YAML (or JSON) file, all or nothing; --dry-run shows the changes only. Warns of each endpoint the change leaves to shadow rules alone."
	if diff {
		use, short = "diff -f FILE", fmt.Sprintf("Show how the stored rules differ from a file, changing nothing; exits %d when they differ, %d when not. Warns of each endpoint the change leaves to shadow rules alone.", exitChanges, exitOK)
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := readRulesFile(file)
			if err != nil {
				return err
			}
			if _, err := rules.Parse(file, b); err != nil { // report locally, before dialing
				return fmt.Errorf("invalid rules, nothing applied:\n%w", err)
			}
			var resp *shardlimitv1.ApplyRulesResponse
			var stored *shardlimitv1.GetRulesResponse
			err = cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (err error) {
				// The stored rules, to tell which endpoints the change
				// leaves to shadow rules alone.
				if stored, err = c.GetRules(ctx, &shardlimitv1.GetRulesRequest{}); err != nil {
					return err
				}
				resp, err = c.ApplyRules(ctx, &shardlimitv1.ApplyRulesRequest{FileName: file, Yaml: b, DryRun: dryRun || diff, Prune: prune})
				return err
			})
			if err != nil {
				return err
			}
			if err := printChanges(cmd.OutOrStdout(), cf.output, resp); err != nil {
				return err
			}
			warnUnenforced(cmd.ErrOrStderr(), stored, resp)
			if diff && len(resp.Changes) > 0 {
				return withCode(exitChanges, nil)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "rules file (- for standard input)")
	f.BoolVar(&prune, "prune", false, "also delete stored rules of the file's services that the file lacks")
	if !diff {
		f.BoolVar(&dryRun, "dry-run", false, "show the changes without storing them")
	}
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func printChanges(w io.Writer, format string, resp *shardlimitv1.ApplyRulesResponse) error {
	return printOutput(w, format, resp, func() error {
		if len(resp.Changes) == 0 {
			_, err := fmt.Fprintln(w, "no changes")
			return err
		}
		for _, c := range resp.Changes {
			switch c.Op {
			case shardlimitv1.RuleChange_OP_ADD:
				fmt.Fprintf(w, "+ %s/%s%s\n%s", c.Service, c.Name, descriptorOf(c), prefixLinesWith("  + ", c.After))
			case shardlimitv1.RuleChange_OP_DELETE:
				fmt.Fprintf(w, "- %s/%s%s\n%s", c.Service, c.Name, descriptorOf(c), prefixLinesWith("  - ", c.Before))
			default:
				fmt.Fprintf(w, "~ %s/%s%s\n%s", c.Service, c.Name, descriptorOf(c), lineDiff(c.Before, c.After))
			}
		}
		verb := "would change"
		if resp.Applied {
			verb = fmt.Sprintf("applied at revision %d:", resp.Revision)
		}
		_, err := fmt.Fprintf(w, "%s %s\n", verb, plural(len(resp.Changes), "rule"))
		return err
	})
}

// warnUnenforced prints a warning line for each endpoint that the change
// resp leaves to shadow rules alone (rules.Unenforce), from the stored
// rules before it.
func warnUnenforced(w io.Writer, stored *shardlimitv1.GetRulesResponse, resp *shardlimitv1.ApplyRulesResponse) {
	var f rules.File
	if yaml.Unmarshal(stored.Yaml, &f) != nil {
		return
	}
	before := f.Rules
	after := slices.Clone(before)
	for _, c := range resp.Changes {
		after = slices.DeleteFunc(after, func(r rules.Rule) bool { return r.Service == c.Service && r.Name == c.Name })
		var r rules.Rule
		if c.Op == shardlimitv1.RuleChange_OP_DELETE || yaml.Unmarshal([]byte(c.After), &r) != nil {
			continue
		}
		r.Service, r.Name = c.Service, c.Name
		after = append(after, r)
	}
	for _, u := range rules.Unenforce(before, after) {
		fmt.Fprintf(w, "warning: %s %s: no enforcing rule decides it any more, only shadow rule %s, which never denies; enforcing rule %s no longer applies to it\n",
			u.Service, u.Endpoint, strings.Join(u.By, ", "), strings.Join(u.Lost, ", "))
	}
}

// descriptorOf shows what a changed descriptor rule applies to, after its
// name: "  (descriptor: remote_address,path=/checkout)"; "" for other rules.
func descriptorOf(c *shardlimitv1.RuleChange) string {
	var r rules.Rule
	if yaml.Unmarshal([]byte(cmp.Or(c.After, c.Before)), &r) != nil || len(r.Descriptor) == 0 {
		return ""
	}
	return "  (" + r.Target() + ")"
}

func prefixLinesWith(p, s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(p + l + "\n")
	}
	return b.String()
}

// lineDiff shows the lines of before missing from after (-) and the lines of
// after missing from before (+); a rule's YAML is one field per line.
func lineDiff(before, after string) string {
	bl := strings.Split(strings.TrimRight(before, "\n"), "\n")
	al := strings.Split(strings.TrimRight(after, "\n"), "\n")
	in := func(ls []string, l string) bool {
		for _, x := range ls {
			if x == l {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	for _, l := range bl {
		if !in(al, l) {
			b.WriteString("  - " + l + "\n")
		}
	}
	for _, l := range al {
		if !in(bl, l) {
			b.WriteString("  + " + l + "\n")
		}
	}
	return b.String()
}

func ctlRulesGetCmd(cf *ctlFlags) *cobra.Command {
	var service string
	cmd := &cobra.Command{
		Use:   "get [--service S]",
		Short: "Print the stored rules as a rules file; what -o yaml (the default) or -o json prints, rules apply -f accepts.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *shardlimitv1.GetRulesResponse
			err := cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (err error) {
				resp, err = c.GetRules(ctx, &shardlimitv1.GetRulesRequest{Service: service})
				return err
			})
			if err != nil {
				return err
			}
			for _, k := range resp.Invalid {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s holds an invalid rule; routers ignore it\n", k)
			}
			if cf.output != "json" {
				// text and yaml: the rules file as the router wrote it.
				_, err = cmd.OutOrStdout().Write(resp.Yaml)
				return err
			}
			var f rules.File
			if err := yaml.Unmarshal(resp.Yaml, &f); err != nil {
				return err
			}
			if f.Rules == nil {
				f.Rules = []rules.Rule{} // "rules": [], which apply accepts; null it would not
			}
			// The key of a rules file, as YAML names it (rules.File has no
			// json tag).
			return printOutput(cmd.OutOrStdout(), cf.output, map[string]any{"rules": f.Rules}, nil)
		},
	}
	cmd.Flags().StringVar(&service, "service", "", "only this service's rules")
	return cmd
}

func ctlRulesDeleteCmd(cf *ctlFlags) *cobra.Command {
	var service, name string
	cmd := &cobra.Command{
		Use:   "delete --service S --name N",
		Short: "Delete one stored rule.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *shardlimitv1.DeleteRuleResponse
			err := cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (err error) {
				resp, err = c.DeleteRule(ctx, &shardlimitv1.DeleteRuleRequest{Service: service, Name: name})
				return err
			})
			if err != nil {
				return err
			}
			if !resp.Existed {
				return fmt.Errorf("no rule %s/%s is stored", service, name)
			}
			w := cmd.OutOrStdout()
			return printOutput(w, cf.output, map[string]any{"service": service, "name": name, "deleted": true}, func() error {
				_, err := fmt.Fprintf(w, "deleted %s/%s\n", service, name)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&service, "service", "", "service (required)")
	cmd.Flags().StringVar(&name, "name", "", "rule name (required)")
	_ = cmd.MarkFlagRequired("service")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}
