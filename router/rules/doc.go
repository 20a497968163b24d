// Package rules parses, validates and indexes rate-limit rules.
//
// Rules are written as YAML: a file holds a list under `rules:`, and each
// rule is stored as one object, in the same format, at
// <prefix>rules/<service>/<endpoint> by later tooling. Parse reports every
// problem with file, line and field, and returns no rules at all if any rule
// is invalid, so an invalid file can never replace valid rules.
//
// A Set answers which rule applies to (service, endpoint): the rule for that
// exact endpoint, else the service's `*` rule. It is immutable; the router
// swaps whole sets.
//
// It never talks to etcd or the network.
package rules
