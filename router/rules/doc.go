// Package rules parses, validates and indexes rate-limit rules.
//
// Rules are written as YAML: a file holds a list under `rules:`, and each
// rule is stored as one object, in the same format, at
// <prefix>rules/<service>/<name> by package rulestore. Parse reports every
// problem with file, line and field (a YAML syntax error at the line of the
// token that broke it, an unknown field with the field it looks like, a
// field the rule's algorithm ignores), and returns no rules at all if any
// rule is invalid, so an invalid file can never replace valid rules.
// ParseStored, for rules read back from etcd, drops instead of refusing
// what older versions stored but ignored.
//
// A Set answers which rules apply to (service, endpoint): the rules for that
// exact endpoint, else the service's `*` rules; and which rules match an
// Envoy descriptor of a domain. Descriptor rules also carry envoy
// ratelimit's model (prefix wildcard values, unlimited, deny_all, replaces,
// allow_request_override), which router/envoy applies. It is immutable; the router
// swaps whole sets.
//
// It never talks to etcd or the network.
package rules
