package request

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Span is the range [From, To) of resolved entries that belong to one
// check; an empty span means no rule applies to it.
type Span struct{ From, To int }

// Resolve binds every check to the rules that apply to it, one entry per
// (check, rule), with the counter's user name under each rule. spans[i]
// holds check i's entries. A service with no rules is ErrUnknownService; a
// check that lacks an attribute a rule's key names is ErrInvalidCheck.
func Resolve(rs *rules.Set, checks []*shardlimitv1.Check) (resolved []rules.Resolved, spans []Span, err error) {
	spans = make([]Span, len(checks))
	resolved = make([]rules.Resolved, 0, len(checks))
	for i, c := range checks {
		matched := rs.Resolve(c.Service, c.Endpoint)
		if matched == nil && !rs.HasService(c.Service) {
			return nil, nil, fmt.Errorf("checks[%d].service: %w %q", i, ErrUnknownService, c.Service)
		}
		spans[i].From = len(resolved)
		for _, rule := range matched {
			user, missing := rule.CounterUser(rules.Attributes{User: c.User, APIKey: c.ApiKey, IP: c.Ip})
			if missing != "" {
				return nil, nil, fmt.Errorf("%w: checks[%d].%s: required by rule %q", ErrInvalidCheck, i, missing, rule.Name)
			}
			resolved = append(resolved, rules.Resolved{Rule: rule, Service: c.Service, Endpoint: c.Endpoint, User: user, Hits: Hits(c)})
		}
		spans[i].To = len(resolved)
	}
	return resolved, spans, nil
}

// Groups is where resolved checks go: Partition[i] is entry i's partition
// and Hash[i] its key's placement hash (shard/key's Hash), which the shard
// is sent so that it does not hash the key again; ByOwner[o] lists the
// entries whose owner is member o of the table; None lists those whose
// partition has no owner (no live shard).
type Groups struct {
	Partition []int
	Hash      []uint64
	ByOwner   [][]int
	None      []int
}

// Group places every resolved check on its partition and groups the
// entries by the partition's owner in table.
func Group(checks []rules.Resolved, table *shardmap.Table) Groups {
	var g Groups
	g.Fill(checks, table)
	return g
}

// Fill is Group into g, reusing the space of g's slices.
func (g *Groups) Fill(checks []rules.Resolved, table *shardmap.Table) {
	n, owners := len(checks), len(table.Members())
	g.Partition = slices.Grow(g.Partition[:0], n)[:n]
	g.Hash = slices.Grow(g.Hash[:0], n)[:n]
	g.ByOwner = slices.Grow(g.ByOwner[:0], owners)[:owners]
	for o := range g.ByOwner {
		g.ByOwner[o] = g.ByOwner[o][:0]
	}
	g.None = g.None[:0]
	for i := range checks {
		c := &checks[i]
		g.Hash[i] = key.Hash(c.Service, c.Rule.Name, c.User)
		g.Partition[i] = key.Partition(g.Hash[i], table.Partitions())
		if o := table.OwnerIndex(g.Partition[i]); o >= 0 {
			g.ByOwner[o] = append(g.ByOwner[o], i)
		} else {
			g.None = append(g.None, i)
		}
	}
}

// Refunds returns the entries whose hits must be given back: within a check
// that one rule denied, every rule that allowed and counted (not by
// failure policy, not in shadow mode, with hits, and without
// consume_on_deny), so that a denied check consumes nothing.
func Refunds(resolved []rules.Resolved, decisions []*shardlimitv1.Decision, spans []Span) []int {
	var out []int
	for _, sp := range spans {
		if sp.To-sp.From < 2 {
			continue
		}
		denied := false
		for _, d := range decisions[sp.From:sp.To] {
			denied = denied || !d.Allowed
		}
		if !denied {
			continue
		}
		for k := sp.From; k < sp.To; k++ {
			if d := decisions[k]; d.Allowed && !d.FailurePolicy && !d.Shadow && resolved[k].Hits > 0 && !resolved[k].Rule.ConsumeOnDeny {
				out = append(out, k)
			}
		}
	}
	return out
}

// Merge combines the decisions of the rules of one check: denied if any
// denies; the reported rule is the denying one with the longest wait, or,
// when all allow, the one with the least remaining. Every rule's own answer
// is kept in Quotas, for callers that advertise every quota policy. The
// answer is flagged
// as by failure policy, as shed by an overloaded router, or as using a soft
// allowance, if any rule's was, and waits for the longest delay. ds is not
// modified.
func Merge(ds []*shardlimitv1.Decision) *shardlimitv1.Decision {
	if len(ds) == 1 {
		return ds[0]
	}
	best := ds[0]
	for _, d := range ds[1:] {
		switch {
		case best.Allowed && !d.Allowed:
			best = d
		case !best.Allowed && !d.Allowed:
			if d.RetryAfter.AsDuration() > best.RetryAfter.AsDuration() {
				best = d
			}
		case best.Allowed && d.Allowed:
			if d.Remaining < best.Remaining {
				best = d
			}
		}
	}
	out := clone(best)
	out.Quotas = make([]*shardlimitv1.Quota, len(ds))
	for i, d := range ds {
		out.Quotas[i] = quotaOf(d)
		out.FailurePolicy = out.FailurePolicy || d.FailurePolicy
		out.Overload = out.Overload || d.Overload
		out.SoftAllowanceUsed = out.SoftAllowanceUsed || d.SoftAllowanceUsed
		if d.Delay.AsDuration() > out.Delay.AsDuration() {
			out.Delay = d.Delay
		}
	}
	return out
}

// clone copies d, sharing its durations (no one changes a decision's
// duration in place), without proto.Clone's reflection: Merge runs for
// every check that several rules apply to.
func clone(d *shardlimitv1.Decision) *shardlimitv1.Decision {
	return &shardlimitv1.Decision{
		Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining, ResetAfter: d.ResetAfter,
		RetryAfter: d.RetryAfter, Rule: d.Rule, FailurePolicy: d.FailurePolicy, Delay: d.Delay,
		SoftAllowanceUsed: d.SoftAllowanceUsed, Shadow: d.Shadow, ShadowDenied: d.ShadowDenied,
		Overload: d.Overload, Window: d.Window, NextAfter: d.NextAfter, Quotas: d.Quotas,
	}
}

// quotaOf is one rule's decision as a Quota of a merged answer.
func quotaOf(d *shardlimitv1.Decision) *shardlimitv1.Quota {
	return &shardlimitv1.Quota{
		Rule: d.Rule, Limit: d.Limit, Window: d.Window, Allowed: d.Allowed, Remaining: d.Remaining,
		ResetAfter: d.ResetAfter, RetryAfter: d.RetryAfter, NextAfter: d.NextAfter,
		FailurePolicy: d.FailurePolicy, Shadow: d.Shadow, ShadowDenied: d.ShadowDenied,
	}
}

// Allowed is the answer to a check that no rule applies to.
func Allowed() *shardlimitv1.Decision {
	return &shardlimitv1.Decision{Allowed: true, ResetAfter: durationpb.New(0), RetryAfter: durationpb.New(0)}
}

// ByPolicy is the answer of rule's failure policy when its owner shard
// cannot answer: allowed or denied as the rule says, flagged, with the
// rule's limit; a denial asks the caller to retry after retry (the
// circuit's cooldown).
func ByPolicy(rule *rules.Rule, retry time.Duration) *shardlimitv1.Decision {
	d := &shardlimitv1.Decision{
		Allowed: rule.FailOpen(), Limit: rule.Limit, Rule: rule.Name, FailurePolicy: true,
		ResetAfter: durationpb.New(0), RetryAfter: durationpb.New(0), Delay: durationpb.New(0),
		Window: durationpb.New(time.Duration(rule.Period)), NextAfter: durationpb.New(0),
	}
	if !d.Allowed {
		d.RetryAfter = durationpb.New(retry)
	}
	return d
}
