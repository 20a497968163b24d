package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestClosestCommand(t *testing.T) {
	ctl := []string{"check", "rules", "members", "rebalance", "shardmap", "limited", "top", "grants", "reset"}
	for _, tc := range []struct {
		word  string
		names []string
		want  []string
	}{
		{"chek", ctl, []string{"check"}},
		{"CHECK", ctl, []string{"check"}},
		{"gte", []string{"validate", "apply", "diff", "get", "delete", "import"}, []string{"get"}}, // a swap
		{"lst", []string{"list", "grant", "revoke", "token"}, []string{"list"}},
		{"membrs", ctl, []string{"members"}},
		{"re", ctl, []string{"rebalance", "reset"}}, // begins both
		{"rule", ctl, []string{"rules"}},
		{"foo", ctl, nil},
		{"x", ctl, nil},
		{"chek", []string{"shard", "router", "rebalance", "dev", "etcd", "ctl", "bench", "version"}, nil},
	} {
		if got := closest(tc.word, tc.names); !slices.Equal(got, tc.want) {
			t.Errorf("closest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"gte", "get", 1}, {"ca", "abc", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.want || editDistance(tc.b, tc.a) != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// A word that is not a command of a group is a usage error naming the
// closest command, at every level; a group given no word prints its help.
func TestUnknownCommand(t *testing.T) {
	root := &cobra.Command{Use: "shardlimit", SilenceErrors: true, SilenceUsage: true}
	leaf := &cobra.Command{Use: "leaf", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	runnable := &cobra.Command{Use: "bench", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	runnable.AddCommand(&cobra.Command{Use: "table", RunE: func(*cobra.Command, []string) error { return nil }})
	root.AddCommand(ctlCmd(), leaf, runnable)
	requireSubcommand(root)
	for _, tc := range []struct {
		args []string
		want string // "" for success
	}{
		{[]string{"ctl", "chek"}, `unknown command "chek" for "shardlimit ctl"; did you mean "check"?`},
		{[]string{"ctl", "rules", "gte"}, `unknown command "gte" for "shardlimit ctl rules"; did you mean "get"?`},
		{[]string{"ctl", "grants", "lst"}, `unknown command "lst" for "shardlimit ctl grants"; did you mean "list"?`},
		{[]string{"ctl", "grants", "token", "crate"}, `unknown command "crate" for "shardlimit ctl grants token"; did you mean "create"?`},
		{[]string{"ctl", "--timeout", "1s", "rebalance", "plna"}, `unknown command "plna" for "shardlimit ctl rebalance"; did you mean "plan"?`},
		{[]string{"lef"}, `unknown command "lef" for "shardlimit"; did you mean "leaf"?`},
		{[]string{"bench", "tabel"}, `unknown command "tabel" for "shardlimit bench"; did you mean "table"?`},
		{[]string{"completion", "bsh"}, `unknown command "bsh" for "shardlimit completion"; did you mean "bash" or "zsh"?`},
		{[]string{"ctl", "zzz"}, `unknown command "zzz" for "shardlimit ctl"; its commands are check, grants, limited, members, rebalance, reset, rules, shardmap, top`},
		{[]string{"ctl", "rules"}, ""},
		{[]string{"bench"}, ""},
		{nil, ""},
	} {
		var out strings.Builder
		root.SetOut(&out)
		root.SetArgs(tc.args)
		err := root.Execute()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want == "":
		case err == nil || !strings.HasPrefix(err.Error(), tc.want) || exitCode(err) != exitUsage:
			t.Errorf("%q: %v (exit %d), want %s (exit %d)", tc.args, err, exitCode(err), tc.want, exitUsage)
		}
		if tc.want != "" && out.Len() > 0 {
			t.Errorf("%q printed %q: help on a mistyped command", tc.args, out.String())
		}
	}
}
