// Package rulestore keeps rules in etcd, one rule per key at
// <prefix>rules/<service>/<name>, the value being the rule in the YAML of a
// rules file entry. (Names are unique within a service; several rules may
// share an endpoint, so the endpoint cannot be the key.)
//
// Apply writes a whole rules file in one etcd transaction that succeeds
// only if no rule it touches changed since it was read: all or nothing.
// Watch follows the prefix and calls back with the full set after every
// change; a stored value that is not a valid rule is ignored with a log line
// and counted, and never replaces the last valid rule under that key.
//
// The rule model and its validation live in package rules; this package is
// only the etcd edge.
package rulestore
