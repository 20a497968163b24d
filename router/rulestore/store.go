package rulestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.yaml.in/yaml/v3"

	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/etcd"
)

// Encode returns the stored form of a rule: its YAML.
func Encode(r *rules.Rule) ([]byte, error) { return yaml.Marshal(r) }

// Decode parses and validates a stored rule, as rules.ParseStored does:
// a field its algorithm ignores, which older versions stored, is dropped.
func Decode(key string, b []byte) (rules.Rule, error) {
	rs, err := rules.ParseStored(key, append([]byte("rules:\n- "), indent(b)...))
	if err != nil {
		return rules.Rule{}, err
	}
	if len(rs) != 1 {
		return rules.Rule{}, fmt.Errorf("%s: holds %d rules, want 1", key, len(rs))
	}
	return rs[0], nil
}

// indent indents every line after the first by two spaces, so that a
// mapping fits under a list item.
func indent(b []byte) []byte {
	return bytes.ReplaceAll(bytes.TrimRight(b, "\n"), []byte("\n"), []byte("\n  "))
}

// Entry is a stored rule with its etcd key and revision.
type Entry struct {
	Key         string
	Rule        rules.Rule
	ModRevision int64
}

// Invalid is a stored value that is not a valid rule.
type Invalid struct {
	Key         string
	Err         error
	ModRevision int64
}

// List reads the stored rules, of one service or all ("").
func List(ctx context.Context, cli *clientv3.Client, prefix, service string) (entries []Entry, invalid []Invalid, rev int64, err error) {
	p := etcd.Layout(prefix).Rules()
	if service != "" {
		p = etcd.Layout(prefix).ServiceRules(service)
	}
	resp, err := cli.Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		return nil, nil, 0, err
	}
	for _, kv := range resp.Kvs {
		r, err := decodeAt(prefix, string(kv.Key), kv.Value)
		if err != nil {
			invalid = append(invalid, Invalid{Key: string(kv.Key), Err: err, ModRevision: kv.ModRevision})
			continue
		}
		entries = append(entries, Entry{Key: string(kv.Key), Rule: r, ModRevision: kv.ModRevision})
	}
	return entries, invalid, resp.Header.Revision, nil
}

// decodeAt decodes a stored rule and checks that it is stored under its own
// key.
func decodeAt(prefix, key string, value []byte) (rules.Rule, error) {
	r, err := Decode(key, value)
	if err != nil {
		return r, err
	}
	if want := etcd.Layout(prefix).Rule(r.Service, r.Name); want != key {
		return r, fmt.Errorf("%s: the rule belongs at %s", key, want)
	}
	return r, nil
}

// ErrConflict means a rule changed between reading and writing.
var ErrConflict = errors.New("rules changed in etcd while applying; nothing was written, apply again")

// Change is one difference between stored and desired rules.
type Change struct {
	Op            string // "add", "change" or "delete"
	Before, After *rules.Rule
	key           string
	modRevision   int64
}

// Key returns the etcd key of the changed rule.
func (c Change) Key() string { return c.key }

// Service and Name identify the changed rule. (A change that deletes an
// invalid stored value has neither Before nor After; they come from its
// key.)
func (c Change) Service() string {
	if r := c.rule(); r != nil {
		return r.Service
	}
	return ""
}

// Name returns the changed rule's name.
func (c Change) Name() string {
	if r := c.rule(); r != nil {
		return r.Name
	}
	return c.key
}

func (c Change) rule() *rules.Rule {
	if c.After != nil {
		return c.After
	}
	return c.Before
}

// Apply stores desired (rules that passed rules.Parse) in one transaction:
// rules not stored yet are added, different ones replaced, and with prune
// the stored rules of desired's services that desired lacks are deleted.
// With dryRun nothing is written. It fails, writing nothing, with
// rules.ErrTooManyRules if the change would leave a service or all of
// them with more rules than bounds allow (and more than they have now,
// so that a store already over them by hand can still be repaired), and
// with ErrConflict if any rule changed since it was read.
func Apply(ctx context.Context, cli *clientv3.Client, prefix string, desired []rules.Rule, bounds rules.Bounds, prune, dryRun bool) (changes []Change, rev int64, err error) {
	// Everything stored, counted first: the transaction fails if any rule
	// changed since, so the count holds when it commits.
	all, err := cli.Get(ctx, etcd.Layout(prefix).Rules(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, 0, err
	}
	services := map[string]bool{}
	for _, r := range desired {
		services[r.Service] = true
	}
	current := map[string]Entry{}
	broken := map[string]int64{} // keys holding invalid values → mod revision
	for svc := range services {
		entries, invalid, _, err := List(ctx, cli, prefix, svc)
		if err != nil {
			return nil, 0, err
		}
		for _, e := range entries {
			current[e.Key] = e
		}
		for _, in := range invalid {
			broken[in.Key] = in.ModRevision
		}
	}
	wanted := map[string]bool{}
	for i := range desired {
		r := &desired[i]
		key := etcd.Layout(prefix).Rule(r.Service, r.Name)
		wanted[key] = true
		cur, ok := current[key]
		badRev, bad := broken[key]
		switch {
		case bad: // an invalid stored value is replaced
			changes = append(changes, Change{Op: "change", After: r, key: key, modRevision: badRev})
		case !ok:
			changes = append(changes, Change{Op: "add", After: r, key: key})
		case !same(&cur.Rule, r):
			changes = append(changes, Change{Op: "change", Before: &cur.Rule, After: r, key: key, modRevision: cur.ModRevision})
		}
	}
	if prune {
		for key, e := range current {
			if !wanted[key] {
				changes = append(changes, Change{Op: "delete", Before: &e.Rule, key: key, modRevision: e.ModRevision})
			}
		}
		for key, rev := range broken {
			if !wanted[key] {
				changes = append(changes, Change{Op: "delete", key: key, modRevision: rev})
			}
		}
	}
	if err := checkBounds(bounds, desired, current, broken, wanted, all.Count, prune); err != nil {
		return nil, 0, err
	}
	slices.SortFunc(changes, func(a, b Change) int { return strings.Compare(a.key, b.key) })
	if dryRun || len(changes) == 0 {
		return changes, 0, nil
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(etcd.Layout(prefix).Rules()), "<", all.Header.Revision+1).WithPrefix()}
	var ops []clientv3.Op
	for _, c := range changes {
		if c.Op == "add" {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(c.key), "=", c.modRevision))
		}
		if c.Op == "delete" {
			ops = append(ops, clientv3.OpDelete(c.key))
			continue
		}
		b, err := Encode(c.After)
		if err != nil {
			return nil, 0, err
		}
		ops = append(ops, clientv3.OpPut(c.key, string(b)))
	}
	resp, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil && strings.Contains(err.Error(), "too many operations in txn request") {
		return nil, 0, fmt.Errorf("%w: %d rules changed at once exceed etcd's --max-txn-ops (a transaction changes at most one rule fewer); raise it or split the file", ErrTooManyChanges, len(changes))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("write rules: %w", err)
	}
	if !resp.Succeeded {
		return nil, 0, ErrConflict
	}
	return changes, resp.Header.Revision, nil
}

// checkBounds checks the rule counts an apply would leave, per service of
// desired and in all, against bounds, where they grow: current and broken
// are the desired services' valid and invalid stored rules by key, wanted
// the keys desired writes, stored the count of every key under the rules
// prefix (valid or not).
func checkBounds(bounds rules.Bounds, desired []rules.Rule, current map[string]Entry, broken map[string]int64, wanted map[string]bool, stored int64, prune bool) error {
	before, after := map[string]int{}, map[string]int{}
	for key, e := range current {
		before[e.Rule.Service]++
		if !prune && !wanted[key] {
			after[e.Rule.Service]++
		}
	}
	for _, r := range desired {
		after[r.Service]++
	}
	kept := 0 // invalid keys an apply leaves in place
	for key := range broken {
		if !prune && !wanted[key] {
			kept++
		}
	}
	total := int(stored) - len(current) - len(broken) + kept
	for _, n := range after {
		total += n
	}
	grown := map[string]int{}
	for s, n := range after {
		if n > before[s] {
			grown[s] = n
		}
	}
	if total <= int(stored) {
		total = 0 // not growing: a store over the bound by hand can be pruned
	}
	return bounds.Check(grown, total)
}

// ErrTooManyChanges means an apply changes more rules than etcd takes in
// one transaction; nothing was written.
var ErrTooManyChanges = errors.New("too many rule changes for one transaction")

// Delete deletes one stored rule and reports whether it existed.
func Delete(ctx context.Context, cli *clientv3.Client, prefix, service, name string) (bool, error) {
	resp, err := cli.Delete(ctx, etcd.Layout(prefix).Rule(service, name))
	if err != nil {
		return false, err
	}
	return resp.Deleted > 0, nil
}

func same(a, b *rules.Rule) bool {
	x, err1 := Encode(a)
	y, err2 := Encode(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// File renders rules as a rules file.
func File(rs []rules.Rule) ([]byte, error) {
	return yaml.Marshal(rules.File{Rules: rs})
}
