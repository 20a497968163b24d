// Package rulestore keeps rules in etcd, one rule per key at
// <prefix>rules/<service>/<name>, the value being the rule in the YAML of a
// rules file entry. (Names are unique within a service; several rules may
// share an endpoint, so the endpoint cannot be the key.)
//
// Apply writes a whole rules file in one etcd transaction that succeeds
// only if no rule changed since it was read: all or nothing. It stores
// only rules that passed the same parsing and validation that routers
// apply to what they read, and refuses a change that would leave a
// service, or all of them, over the rule bounds (rules.Bounds).
//
// Watch follows the prefix and calls back with the full set after every
// change, and that set is a function of etcd's contents alone, so that
// routers agree whenever they started: a stored value that is not a valid
// rule (written around Apply, by etcdctl or another version) counts as
// absent — the endpoint falls to its other rules, the service's "*" rule
// or none — and is logged and counted (shardlimit_router_rules_invalid),
// in a router that held a valid rule under that key before as in one
// started afterwards; valid rules over the bounds are left out the same
// way, by key order (rules.Bounds.Keep), and counted
// (shardlimit_router_rules_over_bound).
//
// The rule model and its validation live in package rules; this package is
// only the etcd edge.
package rulestore
