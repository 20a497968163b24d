package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// requireSubcommand makes every command group under root (a command with
// subcommands: the top level, ctl, ctl rules, ...) refuse a word that is
// not one of its commands, as kubectl does: `ctl chek` is a usage error
// (exit 2) naming the closest command, not the group's help and exit 0.
// A group given no word still prints its help. Cobra prints help for a
// group that cannot run itself before it looks at the arguments, so each
// such group is given a RunE that prints its help.
func requireSubcommand(root *cobra.Command) {
	if !root.HasParent() {
		root.InitDefaultCompletionCmd() // cobra adds it only when it executes: a group too
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.HasSubCommands() {
			return
		}
		accepts := c.Args
		switch {
		case !c.Runnable():
			accepts = cobra.NoArgs
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		case accepts == nil:
			accepts = cobra.ArbitraryArgs // cobra's default
		}
		c.Args = func(c *cobra.Command, args []string) error {
			err := accepts(c, args)
			if err == nil || len(args) == 0 {
				return err
			}
			return unknownCommand(c, args[0])
		}
	}
	walk(root)
}

// unknownCommand is the usage error for a word that is not one of c's
// commands: it names the closest ones, or lists them all when none is
// close.
func unknownCommand(c *cobra.Command, word string) error {
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	msg := fmt.Sprintf("unknown command %q for %q", word, c.CommandPath())
	if close := closest(word, names); len(close) > 0 {
		quoted := make([]string, len(close))
		for i, n := range close {
			quoted[i] = fmt.Sprintf("%q", n)
		}
		return usageErrorf("%s; did you mean %s?", msg, strings.Join(quoted, " or "))
	}
	return usageErrorf("%s; its commands are %s", msg, strings.Join(names, ", "))
}

// maxSuggestDistance is the most edits (insert, delete, substitute,
// swap two neighbours) a word may be from a command it is taken for.
const maxSuggestDistance = 2

// closest returns the names nearest to word, case aside: fewest edits, a
// word that begins a name counting as one edit away. None is returned
// when the nearest is more than maxSuggestDistance edits away, or more
// than half as many as word is long ("foo" is not taken for "top").
func closest(word string, names []string) []string {
	word = strings.ToLower(word)
	best, out := maxSuggestDistance+1, []string(nil)
	for _, n := range names {
		d := editDistance(word, strings.ToLower(n))
		if len(word) > 1 && strings.HasPrefix(strings.ToLower(n), word) {
			d = min(d, 1)
		}
		if d > maxSuggestDistance || d > len(word)/2 {
			continue
		}
		switch {
		case d < best:
			best, out = d, []string{n}
		case d == best:
			out = append(out, n)
		}
	}
	return out
}

// editDistance is the optimal string alignment distance of a and b: the
// fewest single-byte insertions, deletions, substitutions and swaps of
// neighbours that turn a into b ("gte" is one swap from "get").
func editDistance(a, b string) int {
	// d[i][j] is the distance of a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
